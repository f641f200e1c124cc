"""Run in the TFDS venv: write an RLDS dataset shaped like Open X-Embodiment's
``fractal20220817_data`` (RT-1), with TFDS's own writer, in the layout OXE publishes.

The features are fractal's as the TFDS catalog lists them (names, nesting, dtypes and
shapes; JPEG images), at a smaller image size. Values are computed from (episode, step)
by ``oxe_step``, which the test imports (TFDS is imported only to write) to tell what
each value should be after the import:
``python oxe_child.py OUT EPISODES STEPS [WIDTH HEIGHT]``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

INSTRUCTIONS = ("pick rxbar chocolate from bottom drawer and place on counter", "move 7up can near apple")


def oxe_features(tfds: Any, width: int, height: int) -> Any:
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
        "natural_language_instruction": f.Text(),
        "orientation_box": f.Tensor(shape=(2, 3), dtype=np.float32),
        "orientation_start": vector(4),
        "robot_orientation_positions_box": f.Tensor(shape=(3, 3), dtype=np.float32),
        "rotation_delta_to_go": vector(3),
        "src_rotation": vector(4),
        "vector_to_go": vector(3),
        "workspace_bounds": f.Tensor(shape=(3, 3), dtype=np.float32),
    }
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
    """Smooth colour ramps (JPEG keeps them close), shifted by episode and step."""
    y, x = np.mgrid[0:height, 0:width]
    r = (x * 255 // max(width - 1, 1) + step * 8) % 256
    g = (y * 255 // max(height - 1, 1) + episode * 40) % 256
    b = np.full_like(x, (episode * 60 + step * 4) % 256)
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def oxe_step(episode: int, step: int, steps: int, width: int, height: int) -> dict[str, Any]:
    base = episode * 1000 + step

    def vec(n: int, offset: float) -> np.ndarray:
        return (base + offset + np.arange(n) / 16).astype(np.float32)

    last = step == steps - 1
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
        },
        "reward": np.float32(1.0 if last else 0.0),
    }


def main(out: str, episodes: int, steps: int, width: int = 80, height: int = 64) -> None:
    import tensorflow_datasets as tfds  # type: ignore[import-not-found]  # (the TFDS venv's)

    os.makedirs(out, exist_ok=True)
    info = tfds.core.DatasetInfo(
        builder=tfds.core.DatasetIdentity(
            name="fractal20220817_data", version=tfds.core.Version("0.1.0"), data_dir=out, module_name=__name__
        ),
        description="fractal20220817_data-shaped test data",
        features=oxe_features(tfds, width, height),
    )
    writer = tfds.core.SequentialWriter(info, max_examples_per_shard=max(episodes // 3, 1))
    writer.initialize_splits(["train"])
    for episode in range(episodes):
        example = {"steps": [oxe_step(episode, step, steps, width, height) for step in range(steps)]}
        writer.add_examples({"train": [example]})
    writer.close_all()


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
