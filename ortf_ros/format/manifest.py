"""``meta/manifest.json`` as typed, immutable objects.

Parsing checks JSON types and names the offending field, so a malformed manifest
fails with ``FormatError("meta/manifest.json: robot.joints[2].index: expected
integer, got 'x'")`` instead of a KeyError deep inside a trainer. Semantic rules
(required sensor fields, unit quaternions, URDF agreement) belong to the validator,
which reports all of them at once. Unknown keys are kept in ``extra`` and written
back, so a dataset written by another tool survives a round trip through ours.

The manifest's parts live by job beside it: ``robot`` (the robot and its joints),
``spaces`` (action and observation spaces), ``sensors`` (sensors and frames) and
``native_streams`` (native-rate streams and alignment); ``fields`` reads them all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import cast

from ortf_ros.errors import FormatError
from ortf_ros.format import fields, layout
from ortf_ros.format.fields import Fields, JsonDict, Wording, drop_none
from ortf_ros.format.native_streams import Alignment, NativeStream
from ortf_ros.format.robot import Robot
from ortf_ros.format.sensors import Frame, Sensor
from ortf_ros.format.spaces import ActionSpace, ObservationSpace

WORDING = Wording(FormatError, show=repr, mapping="an object", missing="required field is missing")
"""How the manifest's errors are worded: JSON's names (an object, a field), values as Python shows them."""


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

    def stream_tolerance_ms(self, stream: str) -> float | None:
        """The sync tolerance an aligned stream is judged by: its own (``Alignment.tolerance_ms``),
        else the dataset's ``sync_tolerance_ms`` (None: none declared)."""
        own = self.alignment.tolerance_ms if self.alignment is not None else {}
        return own.get(stream, self.sync_tolerance_ms)

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
        f = Fields(data, layout.MANIFEST, WORDING)
        robot = f.sub("robot", required=True)
        action = f.sub("action_space", required=True)
        obs = f.sub("observation_space", required=True)
        frames = {key: Frame.parse(frame) for key, frame in f.named("frames", required=True).items()}
        native_streams = {key: NativeStream.parse(stream) for key, stream in f.named("native_streams").items()}
        alignment_f = f.sub("alignment")
        stats_f = f.sub("statistics")
        statistics = Statistics()
        if stats_f is not None:
            statistics = Statistics(
                total_episodes=stats_f.optional("total_episodes", fields.integer) or 0,
                total_steps=stats_f.optional("total_steps", fields.integer) or 0,
                total_duration_hours=stats_f.optional("total_duration_hours", fields.number) or 0.0,
            )
        return cls(
            ortf_version=f.required("ortf_version", fields.string),
            dataset_id=f.required("dataset_id", fields.string),
            name=f.optional("name", fields.string) or "",
            description=f.optional("description", fields.string),
            created_at=f.optional("created_at", fields.string),
            license=f.optional("license", fields.string),
            robot=Robot.parse(robot),
            action_space=ActionSpace.parse(action),
            observation_space=ObservationSpace.parse(obs),
            sensors=tuple(Sensor.parse(s) for s in f.entries("sensors", required=True)),
            frames=frames,
            collection=f.optional("collection", fields.mapping) or {},
            statistics=statistics,
            timestamp_reference=f.optional("timestamp_reference", fields.string) or "episode_start",
            sync_tolerance_ms=f.optional("sync_tolerance_ms", fields.number),
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
            **drop_none(
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
            **drop_none({"sync_tolerance_ms": self.sync_tolerance_ms}),
            **(
                {"native_streams": {k: v.to_dict() for k, v in self.native_streams.items()}}
                if self.native_streams
                else {}
            ),
            **({"alignment": self.alignment.to_dict()} if self.alignment is not None else {}),
            **self.extra,
        }
