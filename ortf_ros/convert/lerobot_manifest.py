"""The ORTF manifest of an imported LeRobot dataset: what LeRobot says, and what it does not.

LeRobot records the robot type, the frame rate, each camera's size and codec and the
names of the state and action elements. It records no URDF, joint types or limits,
units, action type, camera calibration or coordinate frames. Those fields are declared
``"unknown"`` (units, action type), left out where ORTF makes them optional (joints,
URDF, extrinsics) or, for the intrinsics every camera must have, given as
``{"unknown": true}``. An action dimension's type, which the spec does not let be
unknown, is ``continuous`` (its most general), with a description saying so. Nothing is
guessed, so no one trains on a made-up calibration.
"""

from __future__ import annotations

from pathlib import Path

from ortf_ros.convert.lerobot_meta import INFO, Feature, LeRobotMeta
from ortf_ros.convert.lerobot_spaces import EXTRAS_STREAM, UNKNOWN, Spaces, identifier
from ortf_ros.errors import ExportError
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.robot import Robot
from ortf_ros.format.sensors import UNKNOWN_INTRINSICS, Frame, Resolution, Sensor
from ortf_ros.format.spaces import ObservationSpace

CAMERA_PREFIX = "observation.images."


def camera_key(feature: Feature) -> str:
    """The ORTF observation key (and sensor name) of a LeRobot camera feature."""
    return identifier(feature.key.removeprefix(CAMERA_PREFIX))


def lerobot_manifest(meta: LeRobotMeta, spaces: Spaces) -> Manifest:
    cameras = [_camera(meta, feature) for feature in meta.cameras]
    return Manifest(
        dataset_id="",
        name=f"{meta.root.name} (imported from LeRobot)",
        description=f"Imported by `ortf import lerobot` from the LeRobotDataset {meta.version} at {meta.root}",
        robot=Robot(name=meta.robot_type or UNKNOWN),
        action_space=spaces.action,
        observation_space=ObservationSpace(state=spaces.state, images={s.name: s.name for s in cameras}),
        sensors=tuple(cameras),
        frames={"world": Frame("fixed", description="LeRobot datasets declare no coordinate frames")},
        collection={"source_format": f"lerobot {meta.version}", "source_path": str(Path(meta.root).resolve())},
        native_streams={EXTRAS_STREAM: spaces.extras} if spaces.extras is not None else {},
    )


def _camera(meta: LeRobotMeta, feature: Feature) -> Sensor:
    where = f"{meta.root / INFO}: features.{feature.key}"
    if feature.info.get("video.is_depth_map"):
        raise ExportError(f"{where}.info.video.is_depth_map: depth-map videos are not supported by the import")
    channels = feature.info.get("video.channels", 3)
    if channels != 3:
        raise ExportError(f"{where}.info.video.channels: expected 3 (RGB), got {channels!r}")
    width, height = feature.resolution()
    fps = feature.info.get("video.fps", meta.fps)
    return Sensor(
        name=camera_key(feature),
        type="camera",
        resolution=Resolution(width, height),
        fps=float(fps),
        intrinsics=dict(UNKNOWN_INTRINSICS),
        extra={"source_feature": feature.key, "source_codec": feature.info.get("video.codec", feature.dtype)},
    )
