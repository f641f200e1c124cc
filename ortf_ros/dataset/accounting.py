"""The dataset side of an episode's per-stream accounting (``format.accounting``), counted
where the files are made.

The pipeline counts what came in (read, undecodable, dropped, late, kept); the writer adds
the frames it handed each encoder when the episode ends, and the commit adds what is in the
files: frames in each committed video, rows of each native-rate table, steps that point at
each stream. Counting these at the commit, from the files' own writers, rather than trusting
the pipeline's numbers, is what lets a loss between two stages show as a difference.

An episode recovered after its writer died before ending it has no pipeline counts: its
rows hold the dataset side only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ortf_ros.format import accounting, layout
from ortf_ros.format.accounting import FRAME_ROLES, StreamAccount
from ortf_ros.format.manifest import Manifest


def camera_role(manifest: Manifest, camera: str) -> str:
    return accounting.ROLE_DEPTH if manifest.cameras[camera].is_depth else accounting.ROLE_CAMERA


def with_frames_encoded(
    accounts: Sequence[StreamAccount] | None, manifest: Manifest, frames_encoded: Mapping[str, int]
) -> list[StreamAccount]:
    """``accounts`` (the pipeline's, or none) with each camera's frames handed to its encoder."""
    rows = {a.stream: a for a in accounts or ()}
    for camera, frames in frames_encoded.items():
        account = rows.get(camera) or StreamAccount(camera, camera_role(manifest, camera))
        rows[camera] = replace(account, frames_encoded=frames)
    return list(rows.values())


def committed_accounts(
    accounts: Sequence[StreamAccount] | None,
    manifest: Manifest,
    *,
    length: int,
    frames_in_video: Mapping[str, int],
    native_samples: Mapping[str, int],
    steps_referencing: Mapping[str, int],
    audio_chunks: Mapping[str, int] | None = None,
    clouds: Mapping[str, int] | None = None,
) -> tuple[StreamAccount, ...]:
    """The episode's rows as committed: the staged ones (None: recovered without them) with
    the dataset side counted by the commit. Every camera and native-rate stream has a row.

    ``frames_in_video``: per camera; ``native_samples`` and ``steps_referencing``: per
    native-rate stream (steps whose sample index is set). Steps take every camera's frame
    and their state and action from their streams, so those streams are referenced by all
    ``length`` steps. ``audio_chunks``: per microphone, the rows of its chunk table;
    ``clouds``: rows of each point cloud file (as ``native_samples``; no step points at a
    chunk or a cloud)."""
    rows = {a.stream: a for a in accounts or ()}
    for microphone, chunks in (audio_chunks or {}).items():
        account = rows.get(microphone) or StreamAccount(microphone, accounting.ROLE_AUDIO)
        rows[microphone] = replace(account, native_samples=chunks)
    for camera in manifest.cameras:
        account = rows.get(camera) or StreamAccount(camera, camera_role(manifest, camera))
        rows[camera] = replace(account, frames_in_video=frames_in_video.get(camera, 0), steps_referencing=length)
    for stream in manifest.native_streams:
        role = native_role(manifest, stream)
        account = rows.get(stream) or StreamAccount(stream, role)
        rows[stream] = replace(
            account,
            native_samples=native_samples.get(stream, 0),
            steps_referencing=steps_referencing.get(stream, 0),
        )
    for cloud, count in (clouds or {}).items():
        account = rows.get(cloud) or StreamAccount(cloud, accounting.ROLE_POINT_CLOUD)
        rows[cloud] = replace(account, native_samples=count, steps_referencing=0)
    for name, account in rows.items():
        if account.steps_referencing is None and account.role not in {
            *FRAME_ROLES,
            accounting.ROLE_TF,
            accounting.ROLE_AUDIO,
        }:
            rows[name] = replace(account, steps_referencing=length)
    return tuple(rows.values())


def native_role(manifest: Manifest, stream: str) -> str:
    """The accounting role of a native-rate stream: joint states, a lidar's scans, or a wrench's."""
    if stream == "joint_states":
        return accounting.ROLE_JOINT_STATES
    sensor = manifest.sensor(manifest.native_streams[stream].sensor or "")
    return accounting.ROLE_LIDAR if sensor is not None and sensor.type == "lidar" else accounting.ROLE_WRENCH


def native_index_columns(manifest: Manifest) -> dict[str, str]:
    """Step column -> native-rate stream it points into."""
    return {layout.stream_index_column(stream): stream for stream in manifest.native_streams}
