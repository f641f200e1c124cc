"""``meta/manifest.json`` as typed, immutable objects.

Parsing checks JSON types and names the offending field, so a malformed manifest
fails with ``FormatError("meta/manifest.json: robot.joints[2].index: expected
integer, got 'x'")`` instead of a KeyError deep inside a trainer. Semantic rules
(required sensor fields, unit quaternions, URDF agreement) belong to the validator,
which reports all of them at once. Unknown keys are kept in ``extra`` and written
back, so a dataset written by another tool survives a round trip through ours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

from ortf_ros.errors import FormatError
from ortf_ros.format import layout

T = TypeVar("T")
JsonDict = dict[str, Any]


class _Fields:
    """Typed access to one JSON object, with error messages that name the path."""

    def __init__(self, data: object, where: str, file: str = layout.MANIFEST) -> None:
        if not isinstance(data, Mapping):
            raise FormatError(f"{file}: {where or 'top level'}: expected an object, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data
        self.where = where
        self.file = file
        self.used: set[str] = set()

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, expected: str, value: object) -> FormatError:
        return FormatError(f"{self.file}: {self._path(key)}: expected {expected}, got {value!r}")

    def get(self, key: str, kind: type[T] | tuple[type, ...], expected: str, *, required: bool = False) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                raise FormatError(f"{self.file}: {self._path(key)}: required field is missing")
            return None
        value = self.data[key]
        # bool is an int in Python; never accept it where a number is meant.
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(key, expected, value)
        if not isinstance(value, kind):
            raise self.fail(key, expected, value)
        return value

    def string(self, key: str, *, required: bool = False) -> str | None:
        return self.get(key, str, "a string", required=required)  # type: ignore[no-any-return]

    def integer(self, key: str, *, required: bool = False) -> int | None:
        return self.get(key, int, "an integer", required=required)  # type: ignore[no-any-return]

    def number(self, key: str, *, required: bool = False) -> float | None:
        value = self.get(key, (int, float), "a number", required=required)
        return None if value is None else float(value)

    def numbers(self, key: str, length: int | None = None, *, required: bool = False) -> tuple[float, ...] | None:
        value = self.get(key, list, "a list of numbers", required=required)
        if value is None:
            return None
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
            raise self.fail(key, "a list of numbers", value)
        if length is not None and len(value) != length:
            raise self.fail(key, f"{length} numbers", value)
        return tuple(float(v) for v in value)

    def obj(self, key: str, *, required: bool = False) -> _Fields | None:
        value = self.get(key, Mapping, "an object", required=required)
        return None if value is None else _Fields(value, self._path(key), self.file)

    def objects(self, key: str, *, required: bool = False) -> list[_Fields]:
        value = self.get(key, list, "a list of objects", required=required)
        return [] if value is None else [_Fields(v, f"{self._path(key)}[{i}]", self.file) for i, v in enumerate(value)]

    def raw_dict(self, key: str) -> JsonDict:
        value = self.get(key, Mapping, "an object")
        return {} if value is None else dict(value)

    def extra(self) -> JsonDict:
        return {k: v for k, v in self.data.items() if k not in self.used}


def _drop_none(data: Mapping[str, Any]) -> JsonDict:
    return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True)
class Transform:
    """Child-to-parent transform; rotation is a (w, x, y, z) unit quaternion."""

    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)

    @classmethod
    def parse(cls, f: _Fields) -> Transform:
        t = f.numbers("translation", 3, required=True)
        r = f.numbers("rotation", 4, required=True)
        return cls(translation=t, rotation=r)  # type: ignore[arg-type]

    def to_dict(self) -> JsonDict:
        return {"translation": list(self.translation), "rotation": list(self.rotation)}


@dataclass(frozen=True)
class Joint:
    name: str
    type: str
    index: int
    limits: tuple[float, float] | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> Joint:
        return cls(
            name=f.string("name", required=True),  # type: ignore[arg-type]
            type=f.string("type", required=True),  # type: ignore[arg-type]
            index=f.integer("index", required=True),  # type: ignore[arg-type]
            limits=f.numbers("limits", 2),  # type: ignore[arg-type]
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        limits = list(self.limits) if self.limits is not None else None
        return {
            **_drop_none({"name": self.name, "type": self.type, "index": self.index, "limits": limits}),
            **self.extra,
        }


@dataclass(frozen=True)
class Robot:
    name: str
    id: str | None = None
    manufacturer: str | None = None
    type: str | None = None
    robot_class: str | None = None
    dof: int | None = None
    urdf_path: str | None = None
    joints: tuple[Joint, ...] = ()
    gripper: JsonDict | None = None
    end_effector_link: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> Robot:
        return cls(
            name=f.string("name", required=True),  # type: ignore[arg-type]
            id=f.string("id"),
            manufacturer=f.string("manufacturer"),
            type=f.string("type"),
            robot_class=f.string("class"),
            dof=f.integer("dof"),
            urdf_path=f.string("urdf_path"),
            joints=tuple(Joint.parse(j) for j in f.objects("joints")),
            gripper=f.raw_dict("gripper") or None,
            end_effector_link=f.string("end_effector_link"),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **_drop_none(
                {
                    "id": self.id,
                    "name": self.name,
                    "manufacturer": self.manufacturer,
                    "type": self.type,
                    "class": self.robot_class,
                    "dof": self.dof,
                    "urdf_path": self.urdf_path,
                    "joints": [j.to_dict() for j in self.joints],
                    "gripper": self.gripper,
                    "end_effector_link": self.end_effector_link,
                }
            ),
            **self.extra,
        }


@dataclass(frozen=True)
class ActionDimension:
    name: str
    index: int
    type: str
    units: str
    range: tuple[float, float] | None = None
    values: tuple[float, ...] | None = None
    description: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> ActionDimension:
        return cls(
            name=f.string("name", required=True),  # type: ignore[arg-type]
            index=f.integer("index", required=True),  # type: ignore[arg-type]
            type=f.string("type", required=True),  # type: ignore[arg-type]
            units=f.string("units", required=True),  # type: ignore[arg-type]
            range=f.numbers("range", 2),  # type: ignore[arg-type]
            values=f.numbers("values"),
            description=f.string("description"),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **_drop_none(
                {
                    "name": self.name,
                    "index": self.index,
                    "type": self.type,
                    "units": self.units,
                    "range": list(self.range) if self.range is not None else None,
                    "values": list(self.values) if self.values is not None else None,
                    "description": self.description,
                }
            ),
            **self.extra,
        }


@dataclass(frozen=True)
class ActionSpace:
    type: str
    dimensions: tuple[ActionDimension, ...]
    frame: str | None = None
    control_frequency_hz: float | None = None
    normalization: JsonDict | None = None
    extra: JsonDict = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return len(self.dimensions)

    @classmethod
    def parse(cls, f: _Fields) -> ActionSpace:
        return cls(
            type=f.string("type", required=True),  # type: ignore[arg-type]
            dimensions=tuple(ActionDimension.parse(d) for d in f.objects("dimensions", required=True)),
            frame=f.string("frame"),
            control_frequency_hz=f.number("control_frequency_hz"),
            normalization=f.raw_dict("normalization") or None,
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **_drop_none(
                {
                    "type": self.type,
                    "frame": self.frame,
                    "control_frequency_hz": self.control_frequency_hz,
                    "dimensions": [d.to_dict() for d in self.dimensions],
                    "normalization": self.normalization,
                }
            ),
            **self.extra,
        }


@dataclass(frozen=True)
class StateComponent:
    """One ``observation.state.<name>`` vector; ``names`` labels its elements."""

    dim: int
    units: str | None = None
    frame: str | None = None
    order: str | None = None
    range: tuple[float, float] | None = None
    names: tuple[str, ...] | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> StateComponent:
        names = f.get("names", list, "a list of strings")
        if names is not None and not all(isinstance(n, str) for n in names):
            raise f.fail("names", "a list of strings", names)
        dim = f.integer("dim", required=True)
        if dim is not None and dim < 1:
            raise f.fail("dim", "a positive integer", dim)
        return cls(
            dim=dim,  # type: ignore[arg-type]
            units=f.string("units"),
            frame=f.string("frame"),
            order=f.string("order"),
            range=f.numbers("range", 2),  # type: ignore[arg-type]
            names=tuple(names) if names is not None else None,
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **_drop_none(
                {
                    "dim": self.dim,
                    "units": self.units,
                    "frame": self.frame,
                    "order": self.order,
                    "range": list(self.range) if self.range is not None else None,
                    "names": list(self.names) if self.names is not None else None,
                }
            ),
            **self.extra,
        }


@dataclass(frozen=True)
class ObservationSpace:
    """State components and cameras; ``images`` maps an observation key to a sensor name."""

    state: Mapping[str, StateComponent]
    images: Mapping[str, str] = field(default_factory=dict)
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> ObservationSpace:
        state = _components(f, "state", required=True)
        images_f = f.obj("images")
        images: dict[str, str] = {}
        if images_f is not None:
            for key in images_f.data:
                images[key] = images_f.string(key, required=True)  # type: ignore[assignment]
        return cls(state=state, images=images, extra=f.extra())

    def to_dict(self) -> JsonDict:
        return {
            "state": {k: v.to_dict() for k, v in self.state.items()},
            "images": dict(self.images),
            **self.extra,
        }


@dataclass(frozen=True)
class Resolution:
    width: int
    height: int

    def to_dict(self) -> JsonDict:
        return {"width": self.width, "height": self.height}


@dataclass(frozen=True)
class Extrinsics:
    parent_frame: str
    transform: Transform

    def to_dict(self) -> JsonDict:
        return {"parent_frame": self.parent_frame, **self.transform.to_dict()}


CAMERA_TYPES = ("camera", "depth_camera")
UNKNOWN_INTRINSICS: JsonDict = {"unknown": True}
"""A camera's ``intrinsics`` when its source recorded no calibration: ORTF requires the
field, and saying "unknown" keeps anyone from training on a made-up one."""


@dataclass(frozen=True)
class Sensor:
    """A sensor entry. Type-specific fields not modelled here stay in ``extra``.

    For cameras ``encoding`` says how frames are stored: ``h264`` (MP4) for colour,
    ``ffv1`` (lossless gray16le in MP4) or ``npz`` for 16-bit depth.
    """

    name: str
    type: str
    mount: str | None = None
    mount_link: str | None = None
    resolution: Resolution | None = None
    fps: float | None = None
    encoding: str | None = None
    intrinsics: JsonDict | None = None
    distortion: JsonDict | None = None
    extrinsics: Extrinsics | None = None
    extra: JsonDict = field(default_factory=dict)

    @property
    def is_camera(self) -> bool:
        return self.type in CAMERA_TYPES

    @property
    def is_depth(self) -> bool:
        return self.type == "depth_camera"

    @property
    def intrinsics_unknown(self) -> bool:
        """Whether the intrinsics are declared unknown (``UNKNOWN_INTRINSICS``)."""
        return self.intrinsics is not None and self.intrinsics.get("unknown") is True

    @classmethod
    def parse(cls, f: _Fields) -> Sensor:
        res_f = f.obj("resolution")
        resolution = None
        if res_f is not None:
            resolution = Resolution(
                width=res_f.integer("width", required=True),  # type: ignore[arg-type]
                height=res_f.integer("height", required=True),  # type: ignore[arg-type]
            )
        ext_f = f.obj("extrinsics")
        extrinsics = None
        if ext_f is not None:
            extrinsics = Extrinsics(
                parent_frame=ext_f.string("parent_frame", required=True),  # type: ignore[arg-type]
                transform=Transform.parse(ext_f),
            )
        return cls(
            name=f.string("name", required=True),  # type: ignore[arg-type]
            type=f.string("type", required=True),  # type: ignore[arg-type]
            mount=f.string("mount"),
            mount_link=f.string("mount_link"),
            resolution=resolution,
            fps=f.number("fps"),
            encoding=f.string("encoding"),
            intrinsics=f.raw_dict("intrinsics") or None,
            distortion=f.raw_dict("distortion") or None,
            extrinsics=extrinsics,
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **_drop_none(
                {
                    "name": self.name,
                    "type": self.type,
                    "mount": self.mount,
                    "mount_link": self.mount_link,
                    "resolution": self.resolution.to_dict() if self.resolution else None,
                    "fps": self.fps,
                    "encoding": self.encoding,
                    "intrinsics": self.intrinsics,
                    "distortion": self.distortion,
                    "extrinsics": self.extrinsics.to_dict() if self.extrinsics else None,
                }
            ),
            **self.extra,
        }

    def has_field(self, key: str) -> bool:
        """Whether the manifest entry carries ``key`` (modelled or extra)."""
        value = self.to_dict().get(key)
        return value is not None and value != {}


@dataclass(frozen=True)
class Frame:
    type: str
    parent: str | None = None
    transform: Transform | None = None
    convention: str | None = None
    source: str | None = None
    description: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> Frame:
        tf_f = f.obj("transform")
        return cls(
            type=f.string("type", required=True),  # type: ignore[arg-type]
            parent=f.string("parent"),
            transform=Transform.parse(tf_f) if tf_f is not None else None,
            convention=f.string("convention"),
            source=f.string("source"),
            description=f.string("description"),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **_drop_none(
                {
                    "type": self.type,
                    "parent": self.parent,
                    "transform": self.transform.to_dict() if self.transform else None,
                    "convention": self.convention,
                    "source": self.source,
                    "description": self.description,
                }
            ),
            **self.extra,
        }


def _components(f: _Fields, key: str, *, required: bool = False) -> dict[str, StateComponent]:
    components_f = f.obj(key, required=required)
    components = {}
    if components_f is not None:
        for name in components_f.data:
            component = components_f.obj(name, required=True)
            assert component is not None
            components[name] = StateComponent.parse(component)
    return components


@dataclass(frozen=True)
class NativeStream:
    """A stream kept at its native rate, every sample with its stamps, in its own table
    beside the step table (``layout.stream_path``); steps point into it by sample index.

    The spec says ORTF preserves native rates; a 1 kHz force-torque sensor sampled at a
    30 Hz step rate would otherwise lose 97% of what it measured.
    """

    columns: Mapping[str, StateComponent]
    sensor: str | None = None
    rate_hz: float | None = None
    source: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> NativeStream:
        return cls(
            columns=_components(f, "columns", required=True),
            sensor=f.string("sensor"),
            rate_hz=f.number("rate_hz"),
            source=f.string("source"),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            "columns": {k: v.to_dict() for k, v in self.columns.items()},
            **_drop_none({"sensor": self.sensor, "rate_hz": self.rate_hz, "source": self.source}),
            **self.extra,
        }


@dataclass(frozen=True)
class AlignmentSummary:
    """How far, over all steps, the samples used were from the step times."""

    steps: int
    max_ms: float
    p95_ms: float
    steps_outside_tolerance: int

    def to_dict(self) -> JsonDict:
        return {
            "steps": self.steps,
            "max_ms": self.max_ms,
            "p95_ms": self.p95_ms,
            "steps_outside_tolerance": self.steps_outside_tolerance,
        }


@dataclass(frozen=True)
class Alignment:
    """Streams whose per-step alignment error is a step column (``layout.alignment_column``)."""

    streams: tuple[str, ...]
    summary: Mapping[str, AlignmentSummary] = field(default_factory=dict)

    @classmethod
    def parse(cls, f: _Fields) -> Alignment:
        streams = f.get("streams", list, "a list of stream names", required=True)
        if not all(isinstance(s, str) for s in streams):
            raise f.fail("streams", "a list of stream names", streams)
        summary = {}
        summary_f = f.obj("summary")
        if summary_f is not None:
            for name in summary_f.data:
                entry = summary_f.obj(name, required=True)
                assert entry is not None
                summary[name] = AlignmentSummary(
                    steps=entry.integer("steps") or 0,
                    max_ms=entry.number("max_ms") or 0.0,
                    p95_ms=entry.number("p95_ms") or 0.0,
                    steps_outside_tolerance=entry.integer("steps_outside_tolerance") or 0,
                )
        return cls(streams=tuple(streams), summary=summary)

    def to_dict(self) -> JsonDict:
        return {"streams": list(self.streams), "summary": {k: v.to_dict() for k, v in self.summary.items()}}


@dataclass(frozen=True)
class Statistics:
    total_episodes: int = 0
    total_steps: int = 0
    total_duration_hours: float = 0.0

    def to_dict(self) -> JsonDict:
        return {
            "total_episodes": self.total_episodes,
            "total_steps": self.total_steps,
            "total_duration_hours": self.total_duration_hours,
        }


@dataclass(frozen=True)
class Manifest:
    dataset_id: str
    name: str
    robot: Robot
    action_space: ActionSpace
    observation_space: ObservationSpace
    sensors: tuple[Sensor, ...]
    frames: Mapping[str, Frame]
    ortf_version: str = layout.ORTF_VERSION
    description: str | None = None
    created_at: str | None = None
    license: str | None = None
    collection: JsonDict = field(default_factory=dict)
    statistics: Statistics = field(default_factory=Statistics)
    timestamp_reference: str = "episode_start"
    sync_tolerance_ms: float | None = None
    native_streams: Mapping[str, NativeStream] = field(default_factory=dict)
    alignment: Alignment | None = None
    extra: JsonDict = field(default_factory=dict)

    def sensor(self, name: str) -> Sensor | None:
        return next((s for s in self.sensors if s.name == name), None)

    @property
    def cameras(self) -> dict[str, Sensor]:
        """Observation key -> camera sensor, for the keys whose sensor is declared."""
        found = {}
        for key, sensor_name in self.observation_space.images.items():
            sensor = self.sensor(sensor_name)
            if sensor is not None and sensor.is_camera:
                found[key] = sensor
        return found

    def with_statistics(self, statistics: Statistics) -> Manifest:
        return replace(self, statistics=statistics)

    @property
    def stream_files(self) -> layout.StreamFiles:
        """How the native-rate streams are filed (``layout.STREAM_FILES_KEY``): a Parquet file per
        episode, or, in datasets written before per-episode files, one table per chunk."""
        value = self.extra.get(layout.STREAM_FILES_KEY, layout.STREAM_FILES_PER_CHUNK)
        if value not in (layout.STREAM_FILES_PER_EPISODE, layout.STREAM_FILES_PER_CHUNK):
            raise FormatError(
                f"manifest: {layout.STREAM_FILES_KEY} must be {layout.STREAM_FILES_PER_EPISODE!r} or "
                f"{layout.STREAM_FILES_PER_CHUNK!r}, got {value!r}"
            )
        return cast(layout.StreamFiles, value)

    @classmethod
    def from_dict(cls, data: object) -> Manifest:
        f = _Fields(data, "")
        robot = f.obj("robot", required=True)
        action = f.obj("action_space", required=True)
        obs = f.obj("observation_space", required=True)
        frames_f = f.obj("frames", required=True)
        assert robot is not None and action is not None and obs is not None and frames_f is not None
        frames = {}
        for key in frames_f.data:
            frame = frames_f.obj(key, required=True)
            assert frame is not None
            frames[key] = Frame.parse(frame)
        native_f = f.obj("native_streams")
        native_streams = {}
        if native_f is not None:
            for key in native_f.data:
                stream = native_f.obj(key, required=True)
                assert stream is not None
                native_streams[key] = NativeStream.parse(stream)
        alignment_f = f.obj("alignment")
        stats_f = f.obj("statistics")
        statistics = Statistics()
        if stats_f is not None:
            statistics = Statistics(
                total_episodes=stats_f.integer("total_episodes") or 0,
                total_steps=stats_f.integer("total_steps") or 0,
                total_duration_hours=stats_f.number("total_duration_hours") or 0.0,
            )
        return cls(
            ortf_version=f.string("ortf_version", required=True),  # type: ignore[arg-type]
            dataset_id=f.string("dataset_id", required=True),  # type: ignore[arg-type]
            name=f.string("name") or "",
            description=f.string("description"),
            created_at=f.string("created_at"),
            license=f.string("license"),
            robot=Robot.parse(robot),
            action_space=ActionSpace.parse(action),
            observation_space=ObservationSpace.parse(obs),
            sensors=tuple(Sensor.parse(s) for s in f.objects("sensors", required=True)),
            frames=frames,
            collection=f.raw_dict("collection"),
            statistics=statistics,
            timestamp_reference=f.string("timestamp_reference") or "episode_start",
            sync_tolerance_ms=f.number("sync_tolerance_ms"),
            native_streams=native_streams,
            alignment=Alignment.parse(alignment_f) if alignment_f is not None else None,
            extra=f.extra(),
        )

    @classmethod
    def from_json(cls, text: str, file: str = layout.MANIFEST) -> Manifest:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{file}: not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def to_dict(self) -> JsonDict:
        return {
            **_drop_none(
                {
                    "ortf_version": self.ortf_version,
                    "dataset_id": self.dataset_id,
                    "name": self.name,
                    "description": self.description,
                    "created_at": self.created_at,
                    "license": self.license,
                }
            ),
            "robot": self.robot.to_dict(),
            "action_space": self.action_space.to_dict(),
            "observation_space": self.observation_space.to_dict(),
            "sensors": [s.to_dict() for s in self.sensors],
            "frames": {k: v.to_dict() for k, v in self.frames.items()},
            "collection": self.collection,
            "statistics": self.statistics.to_dict(),
            "timestamp_reference": self.timestamp_reference,
            **_drop_none({"sync_tolerance_ms": self.sync_tolerance_ms}),
            **(
                {"native_streams": {k: v.to_dict() for k, v in self.native_streams.items()}}
                if self.native_streams
                else {}
            ),
            **({"alignment": self.alignment.to_dict()} if self.alignment is not None else {}),
            **self.extra,
        }
