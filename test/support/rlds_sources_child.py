"""Run in the TFDS venv: write RLDS datasets as other tools do, with TFDS's own writer,
in the layout ``tfds.builder_from_directory`` reads and Open X-Embodiment publishes.

``oxe``: shaped like OXE's ``fractal20220817_data`` (RT-1): its features as the TFDS
catalog lists them (names, nesting, dtypes and shapes; JPEG images), at a smaller image
size, and no control rate stated. ``varied``: what other RLDS writers do: raw uint8
image arrays, float depth in metres (an array, and a TFDS float32 image as OXE's
``berkeley_autolab_ur5`` has), uint16 depth as PNG (units not stated), one
``language_instruction`` per episode, episode metadata (a success flag, a file path, a
score), and the rate in ``metadata.json``.

Values are computed from (episode, step) by ``oxe_step`` / ``varied_step``, which the
test imports (TFDS is imported only to write) to tell what each value should be after
the import: ``python rlds_sources_child.py oxe|varied OUT EPISODES STEPS``. ``oxe`` also
takes ``WIDTH HEIGHT CAMERAS`` after them (default 80 64 1): bench/bench_import.py writes
fractal's own 320x256 and a second camera, ``wrist_image``, as other OXE datasets have one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

INSTRUCTIONS = ("pick rxbar chocolate from bottom drawer and place on counter", "move 7up can near apple")


def oxe_features(tfds: Any, width: int, height: int, cameras: int = 1) -> Any:
    f = tfds.features

    def vector(n: int, dtype: Any = np.float32) -> Any:
        return f.Tensor(shape=(n,), dtype=dtype)

    observation = {
        "base_pose_tool_reached": vector(7),
        "gripper_closed": vector(1),
        "gripper_closedness_commanded": vector(1),
        "height_to_bottom": vector(1),
        "image": f.Image(shape=(height, width, 3), dtype=np.uint8, encoding_format="jpeg"),
        "natural_language_embedding": vector(512),
        "natural_language_instruction": f.Tensor(shape=(), dtype=np.str_),  # as in fractal: a string tensor
        "orientation_box": f.Tensor(shape=(2, 3), dtype=np.float32),
        "orientation_start": vector(4),
        "robot_orientation_positions_box": f.Tensor(shape=(3, 3), dtype=np.float32),
        "rotation_delta_to_go": vector(3),
        "src_rotation": vector(4),
        "vector_to_go": vector(3),
        "workspace_bounds": f.Tensor(shape=(3, 3), dtype=np.float32),
    }
    if cameras > 1:
        observation["wrist_image"] = f.Image(shape=(height, width, 3), dtype=np.uint8, encoding_format="jpeg")
    action = {
        "base_displacement_vector": vector(2),
        "base_displacement_vertical_rotation": vector(1),
        "gripper_closedness_action": vector(1),
        "rotation_delta": vector(3),
        "terminate_episode": vector(3, np.int32),
        "world_vector": vector(3),
    }
    step = {
        "action": f.FeaturesDict(action),
        "is_first": np.bool_,
        "is_last": np.bool_,
        "is_terminal": np.bool_,
        "observation": f.FeaturesDict(observation),
        "reward": f.Scalar(dtype=np.float32),
    }
    return f.FeaturesDict({"steps": f.Dataset(step)})


def oxe_image(episode: int, step: int, width: int, height: int) -> np.ndarray:
    """Smooth colour ramps (what JPEG and H.264 keep close), shifted by episode and step."""
    y, x = np.mgrid[0:height, 0:width]
    r = x * 160 // max(width - 1, 1) + step * 8
    g = y * 160 // max(height - 1, 1) + episode * 20
    b = np.full_like(x, 40 + (episode * 30 + step * 4) % 160)
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def oxe_step(episode: int, step: int, steps: int, width: int, height: int, cameras: int = 1) -> dict[str, Any]:
    base = episode * 1000 + step

    def vec(n: int, offset: float) -> np.ndarray:
        return (base + offset + np.arange(n) / 16).astype(np.float32)

    last = step == steps - 1
    wrist = {"wrist_image": oxe_image(episode + 5, steps - step, width, height)} if cameras > 1 else {}
    return {
        "action": {
            "base_displacement_vector": vec(2, 0.1),
            "base_displacement_vertical_rotation": vec(1, 0.2),
            "gripper_closedness_action": vec(1, 0.3),
            "rotation_delta": vec(3, 0.4),
            "terminate_episode": np.array([int(last), int(not last), 0], np.int32),
            "world_vector": vec(3, 0.5),
        },
        "is_first": step == 0,
        "is_last": last,
        "is_terminal": last,
        "observation": {
            "base_pose_tool_reached": vec(7, 0.6),
            "gripper_closed": vec(1, 0.7),
            "gripper_closedness_commanded": vec(1, 0.8),
            "height_to_bottom": vec(1, 0.9),
            "image": oxe_image(episode, step, width, height),
            "natural_language_embedding": vec(512, 0.05),
            "natural_language_instruction": INSTRUCTIONS[episode % len(INSTRUCTIONS)],
            "orientation_box": vec(6, 0.15).reshape(2, 3),
            "orientation_start": vec(4, 0.25),
            "robot_orientation_positions_box": vec(9, 0.35).reshape(3, 3),
            "rotation_delta_to_go": vec(3, 0.45),
            "src_rotation": vec(4, 0.55),
            "vector_to_go": vec(3, 0.65),
            "workspace_bounds": vec(9, 0.75).reshape(3, 3),
            **wrist,
        },
        "reward": np.float32(1.0 if last else 0.0),
    }


VARIED_RATE = 15.0
VARIED_SIZE = (40, 32)  # width, height


def varied_features(tfds: Any) -> Any:
    f = tfds.features
    width, height = VARIED_SIZE
    step = {
        "observation": f.FeaturesDict(
            {
                "rgb": f.Tensor(shape=(height, width, 3), dtype=np.uint8),
                "depth": f.Tensor(shape=(height, width, 1), dtype=np.float32),
                "wrist_depth": f.Image(shape=(height, width, 1), dtype=np.uint16, encoding_format="png"),
                "image_with_depth": f.Image(shape=(height, width, 1), dtype=np.float32),
                "proprio": f.Tensor(shape=(6,), dtype=np.float32),
                "gripper": f.Scalar(dtype=np.float64),
            }
        ),
        "action": f.Tensor(shape=(7,), dtype=np.float32),
        "reward": f.Scalar(dtype=np.float32),
        "discount": f.Scalar(dtype=np.float32),
        "is_first": np.bool_,
        "is_last": np.bool_,
        "is_terminal": np.bool_,
    }
    metadata = {
        "language_instruction": f.Text(),
        "success": np.bool_,
        "file_path": f.Text(),
        "score": f.Scalar(dtype=np.float32),
    }
    return f.FeaturesDict({"steps": f.Dataset(step), "episode_metadata": f.FeaturesDict(metadata)})


def varied_depth(episode: int, step: int) -> np.ndarray:
    """Metres, with a hole (0: no reading) and a NaN, as real depth cameras give."""
    width, height = VARIED_SIZE
    y, x = np.mgrid[0:height, 0:width]
    depth: np.ndarray = (0.5 + 0.001 * (x + 7 * y) + 0.01 * step + 0.1 * episode).astype(np.float32)
    depth[0, 0] = 0.0
    depth[0, 1] = np.nan
    return depth[..., np.newaxis]


def varied_wrist_depth(episode: int, step: int) -> np.ndarray:
    """uint16 over the whole range (0 and 65535 included): PNG and FFV1 keep it bit-exact."""
    width, height = VARIED_SIZE
    y, x = np.mgrid[0:height, 0:width]
    depth: np.ndarray = (300 + 41 * x + 997 * y + 1000 * step + 5000 * episode).astype(np.uint16)
    depth[0, 0], depth[0, 1] = 0, 65535
    return depth[..., np.newaxis]


def varied_step(episode: int, step: int, steps: int) -> dict[str, Any]:
    width, height = VARIED_SIZE
    base = episode * 100 + step
    last = step == steps - 1
    return {
        "observation": {
            "rgb": oxe_image(episode, step, width, height),
            "depth": varied_depth(episode, step),
            "wrist_depth": varied_wrist_depth(episode, step),
            "image_with_depth": varied_depth(episode, step + 1),
            "proprio": (base + np.arange(6) / 8).astype(np.float32),
            "gripper": np.float64(step / steps),
        },
        "action": (base + 0.5 + np.arange(7) / 4).astype(np.float32),
        "reward": np.float32(last),
        "discount": np.float32(0.99),
        "is_first": step == 0,
        "is_last": last,
        "is_terminal": last and episode % 2 == 0,
    }


def varied_metadata(episode: int) -> dict[str, Any]:
    return {
        "language_instruction": f"stack block {episode}" if episode != 3 else "",  # (bridge has some empty)
        "success": episode % 2 == 0,
        "file_path": f"/data/raw/episode_{episode}.h5",
        "score": np.float32(episode / 4),
    }


def main(kind: str, out: str, episodes: int, steps: int, width: int = 80, height: int = 64, cameras: int = 1) -> None:
    import tensorflow_datasets as tfds  # type: ignore[import-not-found]  # (the TFDS venv's)

    os.makedirs(out, exist_ok=True)
    if kind == "oxe":
        name, version, features = "fractal20220817_data", "0.1.0", oxe_features(tfds, width, height, cameras)
        metadata = None
    else:
        name, version, features = "varied_rlds", "1.2.0", varied_features(tfds)
        metadata = tfds.core.MetadataDict(control_frequency_hz=VARIED_RATE)
    info = tfds.core.DatasetInfo(
        builder=tfds.core.DatasetIdentity(
            name=name, version=tfds.core.Version(version), data_dir=out, module_name=__name__
        ),
        description=f"{name}-shaped test data",
        features=features,
        metadata=metadata,
    )
    writer = tfds.core.SequentialWriter(info, max_examples_per_shard=max(episodes // 3, 1))
    writer.initialize_splits(["train"])
    for episode in range(episodes):
        example: dict[str, Any]
        if kind == "oxe":
            example = {"steps": [oxe_step(episode, step, steps, width, height, cameras) for step in range(steps)]}
        else:
            example = {
                "steps": [varied_step(episode, step, steps) for step in range(steps)],
                "episode_metadata": varied_metadata(episode),
            }
        writer.add_examples({"train": [example]})
    writer.close_all()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(arg) for arg in sys.argv[3:]))
