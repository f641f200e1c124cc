"""``ortf export rlds``: an ORTF dataset as an RLDS dataset in TFDS's on-disk layout.

``tfds.builder_from_directory(out).as_dataset(split="train")`` reads the result with no
builder code: ``dataset_info.json``, ``features.json`` and TFRecord shards, written
with TFDS's own ``SequentialWriter``. TensorFlow is an optional extra
(``pip install ortf_ros[rlds]``), imported only when an RLDS export runs.

Mapping (one TFDS example per episode, its ``steps`` a nested dataset):

- ``steps/observation/<camera>``: the frame the step saw, PNG-encoded ``Image``
  (H, W, 3) uint8, lossless against the decoded ORTF video.
- ``steps/observation/<depth camera>``: PNG-encoded ``Image`` (H, W, 1) **uint16**,
  millimetres, bit-exact.
- ``steps/observation/<component>`` for each state component, (dim,) float32, and
  ``steps/observation/state``: the components concatenated in manifest order (what
  Open X-Embodiment loaders expect).
- ``steps/action`` (dim,) float32; ``is_first``, ``is_last``, ``is_terminal`` as stored;
  ``reward`` 1.0 on the last step of a successful episode, else 0.0; ``discount`` 1.0;
  ``language_instruction``: the task; ``timestamp``: seconds (float64).
- ``episode_metadata``: ``episode_id``, ``success`` (1, 0, or -1 when not evaluated),
  ``failure_reason``, ``operator_notes``, ``recorded_at``, ``duration_seconds``.
- ``metadata.json``: the ORTF manifest (dimension names, units, sensors, robot).

An RLDS episode is one serialized example, so memory holds one episode's encoded
frames and steps (frames are PNG-encoded one at a time as they are decoded).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ortf_ros.convert.output_dir import check_target, open_source, staged_directory
from ortf_ros.dataset.reader import Dataset, Episode, column_array
from ortf_ros.errors import ExportError
from ortf_ros.extras import optional_module
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor

SPLIT = "train"
VERSION = "1.0.0"
STATE = "state"  # the concatenated state vector
FLAGS = ("is_first", "is_last", "is_terminal")
NOT_EVALUATED = -1


@dataclass(frozen=True)
class RldsResult:
    path: Path
    name: str
    episodes: int
    steps: int


def to_rlds(
    dataset: Dataset | str | os.PathLike[str], out: str | os.PathLike[str], *, episodes_per_shard: int = 64
) -> RldsResult:
    """Write the dataset to ``out`` (a new or empty directory) as one TFDS ``train`` split."""
    source = open_source(dataset)
    check_target(Path(out))  # bad input is reported before TensorFlow's seconds-long import
    tfds = _tensorflow_datasets()
    manifest = source.manifest
    name = dataset_name(manifest)
    with staged_directory(out) as scratch:
        info = tfds.core.DatasetInfo(
            builder=tfds.core.DatasetIdentity(
                name=name, version=tfds.core.Version(VERSION), data_dir=str(scratch), module_name=__name__
            ),
            description=f"{manifest.name or name}: ORTF {manifest.ortf_version} dataset exported by ortf_ros",
            features=episode_features(tfds, manifest),
            metadata=tfds.core.MetadataDict(ortf_manifest=manifest.to_dict()),
            license=manifest.license,
        )
        writer = tfds.core.SequentialWriter(info, max_examples_per_shard=episodes_per_shard)
        writer.initialize_splits([SPLIT])
        for record in source.episodes:
            with Episode(source, record) as episode:
                writer.add_examples({SPLIT: [episode_example(episode)]})
        writer.close_all()
    return RldsResult(Path(out), name, len(source.episodes), source.total_steps)


def _tensorflow_datasets() -> Any:
    return optional_module("tensorflow_datasets", "RLDS export needs tensorflow-datasets and TensorFlow", "rlds")


def dataset_name(manifest: Manifest) -> str:
    """A TFDS dataset name (lower snake case, starting with a letter) from the manifest's name."""
    name = re.sub(r"[^a-z0-9]+", "_", manifest.name.lower()).strip("_")
    return name if name[:1].isalpha() else f"ortf_{name}".rstrip("_")


def episode_features(tfds: Any, manifest: Manifest) -> Any:
    features = tfds.features
    state = manifest.observation_space.state
    observation: dict[str, Any] = {}
    for camera, sensor in manifest.cameras.items():
        observation[camera] = _image_feature(features, sensor)
    for component_name, component in state.items():
        names = ", ".join(component.names) if component.names else component_name
        observation[component_name] = features.Tensor(
            shape=(component.dim,), dtype=np.float32, doc=f"{names} ({component.units or 'unitless'})"
        )
    clash = (set(observation) & {STATE}) | (set(manifest.cameras) & set(state))
    if clash:
        raise ExportError(
            f"{layout.MANIFEST}: observation names {sorted(clash)} are used twice "
            "(cameras, state components and the concatenated 'state' share steps/observation)"
        )
    observation[STATE] = features.Tensor(
        shape=(sum(c.dim for c in state.values()),),
        dtype=np.float32,
        doc="state components concatenated: " + ", ".join(state),
    )
    action = manifest.action_space
    step = {
        "observation": features.FeaturesDict(observation),
        "action": features.Tensor(
            shape=(action.dim,), dtype=np.float32, doc=", ".join(f"{d.name} ({d.units})" for d in action.dimensions)
        ),
        "reward": features.Scalar(dtype=np.float32, doc="1.0 on the last step of a successful episode"),
        "discount": features.Scalar(dtype=np.float32),
        "timestamp": features.Scalar(dtype=np.float64, doc="seconds since the episode start"),
        "language_instruction": features.Text(),
        **{flag: features.Scalar(dtype=np.bool_) for flag in FLAGS},
    }
    metadata = {
        "episode_id": features.Text(),
        "success": features.Scalar(dtype=np.int8, doc="1 success, 0 failure, -1 not evaluated"),
        "failure_reason": features.Text(),
        "operator_notes": features.Text(),
        "recorded_at": features.Text(),
        "duration_seconds": features.Scalar(dtype=np.float64),
    }
    return features.FeaturesDict({"steps": features.Dataset(step), "episode_metadata": features.FeaturesDict(metadata)})


def _image_feature(features: Any, sensor: Sensor) -> Any:
    height, width = (sensor.resolution.height, sensor.resolution.width) if sensor.resolution else (None, None)
    if sensor.is_depth:
        return features.Image(
            shape=(height, width, 1), dtype=np.uint16, encoding_format="png", doc="depth in millimetres"
        )
    return features.Image(shape=(height, width, 3), dtype=np.uint8, encoding_format="png")


def episode_example(episode: Episode) -> dict[str, Any]:
    """One RLDS episode; its steps are a generator, so frames are decoded as TFDS encodes them."""
    record = episode.record
    success = NOT_EVALUATED if record.success is None else int(record.success)
    return {
        "steps": _steps(episode),
        "episode_metadata": {
            "episode_id": record.episode_id,
            "success": success,
            "failure_reason": record.failure_reason or "",
            "operator_notes": record.operator_notes or "",
            "recorded_at": record.recorded_at or "",
            "duration_seconds": record.duration_seconds,
        },
    }


def _steps(episode: Episode) -> Iterator[dict[str, Any]]:
    manifest = episode.dataset.manifest
    components = list(manifest.observation_space.state)
    columns = ["timestamp", "action", *FLAGS, *(layout.state_column(c) for c in components)]
    table = episode.steps(columns)
    arrays = {c: column_array(table[c].combine_chunks()) for c in columns}
    state = np.concatenate([arrays[layout.state_column(c)] for c in components], axis=1)
    frames = {camera: episode.step_frames(camera) for camera in manifest.cameras}
    depth = {camera for camera, sensor in manifest.cameras.items() if sensor.is_depth}
    last = table.num_rows - 1
    instruction = episode.task.instruction
    for i in range(table.num_rows):
        observation: dict[str, Any] = {c: arrays[layout.state_column(c)][i] for c in components}
        observation[STATE] = state[i]
        for camera, camera_frames in frames.items():
            frame = next(camera_frames)
            observation[camera] = frame[..., np.newaxis] if camera in depth else frame
        yield {
            "observation": observation,
            "action": arrays["action"][i],
            "reward": np.float32(1.0 if episode.record.success and i == last else 0.0),
            "discount": np.float32(1.0),
            "timestamp": arrays["timestamp"][i],
            "language_instruction": instruction,
            **{flag: bool(arrays[flag][i]) for flag in FLAGS},
        }
