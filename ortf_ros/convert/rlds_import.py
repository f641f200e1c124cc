"""``ortf import rlds``: an RLDS dataset in TFDS's on-disk layout (what Open X-Embodiment
publishes and ``ortf export rlds`` writes) into a new ORTF dataset.

TensorFlow is not needed: the builder directory is read by ``tfds_layout`` and
``tfrecord`` (JSON, TFRecord framing and ``tf.train.Example`` decoded directly), so
``pip install ortf_ros`` imports RLDS. ``rlds_plan`` decides, from ``features.json``
alone, where each feature goes; this module builds the manifest from that plan and
streams the episodes through ``DatasetWriter``, one record (an RLDS episode) at a time,
each step's frames decoded as the writer takes them. Memory holds one episode's record,
never more, whatever the dataset's length.

The dataset is built beside the destination and renamed onto it when complete
(``output_dir.staged_directory``), so bad input leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from ortf_ros.convert.lerobot_origin import manifest_mismatch
from ortf_ros.convert.lerobot_spaces import UNDESCRIBED_TYPE, UNKNOWN
from ortf_ros.convert.output_dir import staged_directory
from ortf_ros.convert.rlds_plan import (
    EXTRAS_STREAM,
    ActionOptions,
    Camera,
    Plan,
    make_plan,
    warn_unknown_action,
)
from ortf_ros.convert.tfds_layout import IMAGE, Leaf, Split, TfdsDataset, decode_image, read_tfds, tensor_values, texts
from ortf_ros.convert.tfrecord import FeatureValues
from ortf_ros.dataset.catalog import load_manifest
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.validation import check_manifest
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ExportError, FormatError, UsageError, WriterError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest, Statistics
from ortf_ros.format.native_streams import NativeStream
from ortf_ros.format.robot import Robot
from ortf_ros.format.sensors import UNKNOWN_INTRINSICS, Frame, Resolution, Sensor
from ortf_ros.format.spaces import ActionDimension, ActionSpace, ObservationSpace, StateComponent
from ortf_ros.io import atomic

EXTENSION = "rlds"  # the manifest's extension field for what has no ORTF place
RATE_KEYS = ("control_frequency_hz", "control_frequency", "fps", "frequency_hz")  # metadata.json, if stated
UNDESCRIBED_ACTION = (
    "the source RLDS dataset does not say what this dimension is: "
    "continuous is the spec's most general type, and the units are unknown"
)
Progress = Callable[[int, int], None]  # (episodes read, episodes in the chosen splits)


@dataclass(frozen=True)
class RldsImportResult:
    path: Path
    episodes: int
    steps: int
    cameras: tuple[str, ...]
    fps: float
    summary: Mapping[str, str]  # source feature -> where it went, or why it was left
    skipped: int = 0  # episodes without steps
    uninstructed: int = 0  # episodes with an empty instruction, whose task is NO_INSTRUCTION (no --task)


EPISODE_METADATA = "meta/rlds_episode_metadata.jsonl"
"""The source's episode metadata that has no ORTF field: one JSON line per episode, with its
ORTF ``episode_id``, written as the episode is (memory holds one episode's, and the manifest
stays small on a dataset of 100,000 episodes); the manifest's ``rlds`` extension names it."""

NO_INSTRUCTION = "(no instruction)"
"""The task of an episode whose instruction is empty, where no ``--task`` names it: said,
counted, and one task trainers can filter out, rather than an import stopped hours in."""


def from_rlds(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    fps: float | None = None,
    splits: Sequence[str] = (),
    action: ActionOptions | None = None,
    task: str | None = None,
    float_depth_units: str | None = None,
    config: WriterConfig | None = None,
    warn: Callable[[str], None] = lambda _: None,
    progress: Progress | None = None,
) -> RldsImportResult:
    """Import the TFDS builder directory ``src`` (its ``splits``, default all) as a new ORTF dataset at ``dst``."""
    action = action or ActionOptions()
    source = read_tfds(Path(src))
    chosen = _chosen_splits(source, splits)
    origin = _exported_manifest(source, warn)
    plan = make_plan(source, action, origin, float_depth_units)
    if origin is not None:
        order = list(origin.observation_space.state)
        plan.state = {
            k: plan.state[k] for k in sorted(plan.state, key=lambda k: order.index(k) if k in order else len(order))
        }
    rate = _rate(source, origin, fps)
    if plan.instruction is None and not task:
        raise ExportError(
            f"{source.root / 'features.json'}: no language instruction (per step or per episode) to take the "
            "tasks from; pass --task TEXT"
        )
    sizes = _frame_sizes(source, chosen, plan)
    manifest = _manifest(source, plan, rate, action, sizes)
    fitted = _fit_origin(origin, manifest, warn) if origin is not None else None
    if fitted is None:
        warn_unknown_action(plan, action, warn)
    importer = _EpisodeImporter(source, plan, fitted or manifest, rate, task, warn, progress, chosen)
    with staged_directory(dst) as scratch:
        with DatasetWriter(scratch, fitted or manifest, config=config) as writer, importer.keeping(scratch):
            importer.writer = writer
            for split in chosen:
                importer.splits[split.name] = {"first_episode": None, "episodes": 0}
                for where, example in source.episodes(split):
                    with source.decoding(where):
                        importer.run(split.name, where, example)
        _write_extension(scratch, source, plan, importer)
    return RldsImportResult(
        Path(dst),
        importer.episodes,
        importer.steps,
        tuple(plan.cameras),
        rate,
        dict(plan.summary),
        importer.skipped,
        importer.uninstructed,
    )


def _chosen_splits(source: TfdsDataset, names: Sequence[str]) -> list[Split]:
    if not names:
        return list(source.splits)
    known = {s.name: s for s in source.splits}
    for name in names:
        if name not in known:
            raise UsageError(f"--split {name}: {source.root / 'dataset_info.json'} has splits {sorted(known)}")
    return [known[n] for n in dict.fromkeys(names)]  # (a split named twice is imported once)


def _exported_manifest(source: TfdsDataset, warn: Callable[[str], None]) -> Manifest | None:
    """The ORTF manifest ``ortf export rlds`` kept in metadata.json, if any."""
    data = source.metadata.get("ortf_manifest")
    if data is None:
        return None
    try:
        return Manifest.from_dict(data)
    except FormatError as exc:
        warn(f"metadata.json: ortf_manifest not used ({exc}); the manifest is built from features.json")
        return None


def _rate(source: TfdsDataset, origin: Manifest | None, fps: float | None) -> float:
    """The control rate: --fps, else what the metadata states; refused without either."""
    if fps is not None:
        return fps
    if origin is not None:
        stated = origin.action_space.control_frequency_hz or next(
            (s.fps for s in origin.cameras.values() if s.fps), None
        )
        if stated:
            return float(stated)
    for key in RATE_KEYS:
        value = source.metadata.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    raise ExportError(
        f"{source.root}: the dataset does not state its control rate (metadata.json has no "
        f"{'/'.join(RATE_KEYS)}); pass --fps HZ"
    )


def _frame_sizes(source: TfdsDataset, splits: Sequence[Split], plan: Plan) -> dict[str, tuple[int, int]]:
    """(width, height) per camera: from features.json, or its first frame where the shape is open."""
    sizes: dict[str, tuple[int, int]] = {}
    for key, camera in plan.cameras.items():
        height, width = camera.leaf.shape[:2]
        if height is not None and width is not None:
            sizes[key] = (width, height)
    for split in splits:
        if len(sizes) == len(plan.cameras):
            break
        for where, example in source.episodes(split):
            for key, camera in plan.cameras.items():
                if key not in sizes and camera.leaf.kind == IMAGE:
                    with source.decoding(where):
                        items = example[camera.leaf.path].bytes_items() if camera.leaf.path in example else []
                        if items:
                            frame = decode_image(items[0], camera.leaf, where)
                            sizes[key] = (frame.shape[1], frame.shape[0])
            if len(sizes) == len(plan.cameras):
                break
    open_shapes = sorted(set(plan.cameras) - set(sizes))
    if open_shapes:
        raise ExportError(f"{source.root}: cameras {open_shapes} have no fixed size and no frame to take it from")
    return sizes


def _manifest(
    source: TfdsDataset, plan: Plan, rate: float, options: ActionOptions, sizes: Mapping[str, tuple[int, int]]
) -> Manifest:
    sensors = tuple(_sensor(key, camera, rate, sizes[key]) for key, camera in plan.cameras.items())
    state = {key: StateComponent(leaf.size, UNKNOWN, extra=_doc(leaf)) for key, leaf in plan.state.items()}
    streams = {}
    if plan.extras:
        streams[EXTRAS_STREAM] = NativeStream(
            columns={column: StateComponent(leaf.size, UNKNOWN) for column, leaf in plan.extras.items()},
            rate_hz=rate,
            source="rlds step features " + ", ".join(leaf.path for leaf in plan.extras.values()),
        )
    root = source.root.resolve()
    return Manifest(
        dataset_id="",
        name=f"{source.name} (imported from RLDS)",
        description=source.description or f"Imported by `ortf import rlds` from {root}",
        license=source.license,
        robot=Robot(name=UNKNOWN),
        action_space=_action_space(plan, rate, options),
        observation_space=ObservationSpace(state=state, images={s.name: s.name for s in sensors}),
        sensors=sensors,
        frames={"world": Frame("fixed", description="RLDS datasets declare no coordinate frames")},
        collection={
            "source_format": "rlds (tfds)",
            "source_path": str(root),
            "tfds_name": source.name,
            "tfds_version": source.version,
        },
        native_streams=streams,
    )


def _doc(leaf: Leaf) -> dict[str, Any]:
    return {"description": leaf.doc} if leaf.doc else {}


def _sensor(key: str, camera: Camera, rate: float, size: tuple[int, int]) -> Sensor:
    leaf = camera.leaf
    extra: dict[str, Any] = {
        "source_feature": leaf.path,
        "source_codec": leaf.encoding if leaf.kind == IMAGE else "raw",
    }
    if camera.depth:
        # The range uint16 millimetres can hold (as the ROS pipeline declares it): the
        # dataset does not state its sensor's.
        extra.update(bit_depth=16, depth_range=[0.0, 65.535])
        if camera.scale is not None:
            extra["depth_units"] = "millimeters"
        else:  # the field is required; what the values are in is not guessed (as an action's units)
            extra["depth_units"] = UNKNOWN
            extra["depth_units_note"] = "the RLDS dataset does not state the units of this uint16 depth"
    return Sensor(
        name=key,
        type="depth_camera" if camera.depth else "camera",
        resolution=Resolution(*size),
        fps=rate,
        intrinsics=dict(UNKNOWN_INTRINSICS),
        extra=extra,
    )


def _action_space(plan: Plan, rate: float, options: ActionOptions) -> ActionSpace:
    dim = plan.action_dim
    names: list[str] = []
    for leaf in plan.action:
        base = leaf.path.rsplit("/", 1)[-1]
        names += [base] if leaf.size == 1 else [f"{base}_{i}" for i in range(leaf.size)]
    names = list(options.names) if options.names else names
    types = _per_dimension("--action-types", options.types, dim)
    units = _per_dimension("--action-units", options.units, dim)
    if len(names) != dim:
        raise UsageError(f"--action-names: {len(names)} name(s), but the action has {dim} dimensions")
    dimensions = tuple(
        ActionDimension(
            name,
            i,
            types[i] if types else UNDESCRIBED_TYPE,
            units[i] if units else UNKNOWN,
            description=None if types and units else UNDESCRIBED_ACTION,
        )
        for i, name in enumerate(names)
    )
    return ActionSpace(type=options.space_type or UNKNOWN, dimensions=dimensions, control_frequency_hz=rate)


def _per_dimension(option: str, values: Sequence[str] | None, dim: int) -> list[str] | None:
    if not values:
        return None
    if len(values) == 1:
        return list(values) * dim
    if len(values) != dim:
        raise UsageError(f"{option}: {len(values)} value(s); expected one, or one per dimension ({dim})")
    return list(values)


def _fit_origin(origin: Manifest, imported: Manifest, warn: Callable[[str], None]) -> Manifest | None:
    """The exported dataset's own manifest, fitted to what is imported; None if it no longer fits."""
    mismatch = manifest_mismatch(origin, imported)
    if mismatch is None and set(origin.cameras) != set(imported.cameras):
        mismatch = f"cameras {sorted(origin.cameras)}, features {sorted(imported.cameras)}"
    if mismatch:
        warn(f"metadata.json: ortf_manifest no longer describes the data ({mismatch}); built from features.json")
        return None
    fitted = replace(
        origin,
        dataset_id="",
        robot=replace(origin.robot, urdf_path=None),  # the export keeps no URDF
        native_streams=imported.native_streams,
        alignment=None,
        statistics=Statistics(),
        collection={**origin.collection, **imported.collection},
    )
    errors = [f.field_message() for f in check_manifest(fitted) if f.severity == "error"]
    if errors:
        warn(f"metadata.json: ortf_manifest not used (not valid ORTF: {'; '.join(errors)}); built from features.json")
        return None
    return fitted


class _EpisodeImporter:
    def __init__(
        self,
        source: TfdsDataset,
        plan: Plan,
        manifest: Manifest,
        rate: float,
        task: str | None,
        warn: Callable[[str], None],
        progress: Progress | None,
        splits: Sequence[Split],
    ) -> None:
        self.source, self.plan, self.rate, self.task, self.warn, self.progress = (
            source,
            plan,
            rate,
            task,
            warn,
            progress,
        )
        self.depth = {key for key, sensor in manifest.cameras.items() if sensor.is_depth}
        self.writer: DatasetWriter | None = None
        self.episodes = self.steps = self.skipped = self.read = self.uninstructed = 0
        self.total = sum(s.episodes for s in splits)
        self.kept: IO[str] | None = None  # EPISODE_METADATA, while importing
        self.kept_episodes = 0
        self.splits: dict[str, dict[str, Any]] = {}
        self.clipped = 0

    def run(self, split: str, where: str, example: Mapping[str, FeatureValues]) -> None:
        writer = self.writer
        assert writer is not None
        self.read += 1
        steps = self._step_count(example, where)
        if steps == 0:
            self.skipped += 1
            self.warn(f"{where}: an episode without steps; skipped")
            return
        plan = self.plan
        values = {leaf.path: tensor_values(leaf, example.get(leaf.path), steps, where) for leaf in self._tensors()}
        action = np.concatenate([values[leaf.path].reshape(steps, -1) for leaf in plan.action], axis=1).astype(
            np.float32
        )
        state = {k: values[leaf.path].reshape(steps, -1).astype(np.float32) for k, leaf in plan.state.items()}
        extras = {k: values[leaf.path].reshape(steps, -1) for k, leaf in plan.extras.items()}
        times = self._times(values, steps, where)
        task = self._task(example, where)
        labels = self._labels(example, where)
        terminal = bool(values[plan.flags["is_terminal"].path].any()) if "is_terminal" in plan.flags else None
        self._check_flags(values, steps, where)
        frames = {key: self._frames(key, camera, example, values, steps, where) for key, camera in plan.cameras.items()}
        recorded_at = labels.pop("recorded_at", None) or None
        episode_id = writer.begin_episode(task, recorded_at=recorded_at)
        try:
            for i in range(steps):
                samples = {}
                if extras:
                    row = {column: matrix[i] for column, matrix in extras.items()}
                    samples[EXTRAS_STREAM] = writer.add_sample(EXTRAS_STREAM, float(times[i]), row)
                images = {key: next(camera_frames) for key, camera_frames in frames.items()}
                writer.add_step(
                    float(times[i]), {k: m[i] for k, m in state.items()}, action[i], images, samples=samples
                )
        except BaseException as exc:
            writer.discard_episode()
            if isinstance(exc, WriterError):  # a frame or vector the writer refuses: say which record
                raise ExportError(f"{where}: {exc}") from None
            raise
        # (a commit that fails leaves the episode staged, and the dataset to the scratch directory's removal)
        writer.end_episode(
            labels.get("success"),
            labels.get("failure_reason") or None,
            labels.get("operator_notes") or None,
            terminal=terminal,
        )
        kept = self._kept(example, values, where)
        if "success_value" in labels:
            kept["success"] = labels["success_value"]
        if kept and self.kept is not None:
            self.kept.write(json.dumps({"episode_id": episode_id, **kept}) + "\n")
            self.kept_episodes += 1
        entry = self.splits[split]
        entry["first_episode"] = entry["first_episode"] or episode_id
        entry["episodes"] += 1
        self.episodes += 1
        self.steps += steps
        if self.progress is not None:
            self.progress(self.read, self.total)

    @contextlib.contextmanager
    def keeping(self, root: Path) -> Iterator[None]:
        """``EPISODE_METADATA`` open in the dataset being built (renamed whole with it), synced
        at the end."""
        (root / EPISODE_METADATA).parent.mkdir(parents=True, exist_ok=True)
        with (root / EPISODE_METADATA).open("w", encoding="utf-8") as self.kept:
            yield
            self.kept.flush()
            os.fsync(self.kept.fileno())
        self.kept = None

    def _tensors(self) -> list[Leaf]:
        plan = self.plan
        leaves = [*plan.action, *plan.state.values(), *plan.extras.values(), *plan.flags.values(), *plan.kept]
        leaves += [c.leaf for c in plan.cameras.values() if c.leaf.kind != IMAGE]
        leaves += [leaf for name, leaf in plan.labels.items() if name == "success"]
        if plan.timestamp is not None:
            leaves.append(plan.timestamp)
        return [leaf for leaf in leaves if leaf.kind != "text"]

    def _step_count(self, example: Mapping[str, FeatureValues], where: str) -> int:
        plan = self.plan
        leaf = next(iter(plan.flags.values()), None) or plan.action[0]
        feature = example.get(leaf.path)
        if feature is None:
            raise ExportError(f"{where}: feature {leaf.path!r} is missing from the record")
        return feature.count() // (1 if leaf in plan.flags.values() else max(leaf.size, 1))

    def _times(self, values: Mapping[str, np.ndarray], steps: int, where: str) -> np.ndarray:
        timestamp = self.plan.timestamp
        if timestamp is None:
            return np.arange(steps, dtype=np.float64) / self.rate
        times = values[timestamp.path].astype(np.float64).reshape(steps)
        if not (np.isfinite(times).all() and (np.diff(times) > 0).all()):
            raise ExportError(f"{where}: feature {timestamp.path!r}: expected finite, increasing step times")
        return times

    def _task(self, example: Mapping[str, FeatureValues], where: str) -> str:
        leaf = self.plan.instruction
        found = texts(leaf, example.get(leaf.path), where) if leaf is not None else []
        distinct = list(dict.fromkeys(t for t in found if t.strip()))
        if len(distinct) > 1:
            self.warn(f"{where}: {len(distinct)} different instructions in one episode; ORTF keeps the first")
        if distinct:
            return distinct[0]
        if self.task:
            return self.task
        self.uninstructed += 1
        if self.uninstructed == 1:
            self.warn(
                f"{where}: feature {leaf.path if leaf else '?'!r}: an empty instruction; the task of such "
                f"episodes is {NO_INSTRUCTION!r} (pass --task TEXT to name it)"
            )
        return NO_INSTRUCTION

    def _labels(self, example: Mapping[str, FeatureValues], where: str) -> dict[str, Any]:
        labels: dict[str, Any] = {}
        for name, leaf in self.plan.labels.items():
            if name == "success":
                value = int(tensor_values(leaf, example.get(leaf.path), 1, where))
                if value in (0, 1):
                    labels[name] = bool(value)
                elif value != -1:  # -1: not evaluated (ortf export rlds); anything else is kept as it is
                    labels["success_value"] = value
            else:
                found = texts(leaf, example.get(leaf.path), where)
                labels[name] = found[0] if found else ""
        return labels

    def _check_flags(self, values: Mapping[str, np.ndarray], steps: int, where: str) -> None:
        expected = {"is_first": np.arange(steps) == 0, "is_last": np.arange(steps) == steps - 1}
        for name, marks in expected.items():
            leaf = self.plan.flags.get(name)
            if leaf is not None and not np.array_equal(values[leaf.path].reshape(steps).astype(bool), marks):
                self.warn(
                    f"{where}: {leaf.path} is not set on the {name.removeprefix('is_')} step only; ORTF sets it so"
                )

    def _frames(
        self,
        key: str,
        camera: Camera,
        example: Mapping[str, FeatureValues],
        values: Mapping[str, np.ndarray],
        steps: int,
        where: str,
    ) -> Any:
        leaf = camera.leaf
        if leaf.kind == IMAGE:
            feature = example.get(leaf.path)
            items = feature.bytes_items() if feature is not None else []
            if len(items) != steps:
                raise ExportError(f"{where}: feature {leaf.path!r}: {len(items)} image(s) for {steps} steps")
            frames: Iterator[np.ndarray] = (decode_image(item, leaf, where) for item in items)
        else:
            frames = iter(values[leaf.path])
        for frame in frames:
            if camera.depth and frame.ndim == 3:
                frame = frame[..., 0]
            if camera.scale is not None:
                frame = self._millimetres(frame, camera.scale)
            yield np.ascontiguousarray(frame)

    def _millimetres(self, depth: np.ndarray, scale: float) -> np.ndarray:
        """Float depth to uint16 millimetres: rounded to nearest; no reading (<= 0, not finite)
        and beyond 65535 mm become 0, ORTF's "no depth" (counted, warned about once)."""
        mm = np.rint(depth.astype(np.float64) * scale)
        invalid = ~np.isfinite(mm) | (mm <= 0) | (mm > 65535)
        beyond = int((np.isfinite(mm) & (mm > 65535)).sum())
        if beyond and not self.clipped:
            self.warn(f"float depth beyond 65.535 m stored as 0 (no reading); {beyond} pixel(s) in one frame")
        self.clipped += beyond
        return np.where(invalid, 0, mm).astype(np.uint16)

    def _kept(
        self, example: Mapping[str, FeatureValues], values: Mapping[str, np.ndarray], where: str
    ) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for leaf in self.plan.kept:
            if leaf.kind == "text":
                found = texts(leaf, example.get(leaf.path), where)
                kept[leaf.path] = found[0] if len(found) == 1 else found
            else:
                kept[leaf.path] = values[leaf.path].tolist()
        return kept


def _write_extension(root: Path, source: TfdsDataset, plan: Plan, importer: _EpisodeImporter) -> None:
    """What has no ORTF field goes to the manifest's ``rlds`` extension, with where each feature went."""
    manifest = load_manifest(root)
    extension = {
        "source": str(source.root.resolve()),
        "tfds_name": source.name,
        "tfds_version": source.version,
        "splits": importer.splits,
        "features": dict(plan.summary),
        "episode_metadata": {"file": EPISODE_METADATA, "episodes": importer.kept_episodes},
    }
    atomic.write_json(
        root / layout.MANIFEST, replace(manifest, extra={**manifest.extra, EXTENSION: extension}).to_dict()
    )
