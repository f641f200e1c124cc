"""``validate``: every rule over a dataset directory, in the order the files depend on
each other (manifest, then episode index and tasks, then videos, then steps).

A file that cannot be read becomes one finding and the rules that need it are
skipped, so a broken dataset gets a complete list of what is wrong instead of an
exception at the first problem.
"""

from __future__ import annotations

import os
from pathlib import Path

from ortf_ros.dataset.deletion import pending_deletion
from ortf_ros.dataset.validation.accounting import check_frames_and_steps
from ortf_ros.dataset.validation.audio import check_audio
from ortf_ros.dataset.validation.extras import annotation_dirs, check_annotations, check_staging, check_stats
from ortf_ros.dataset.validation.findings import Finding, Report, finding
from ortf_ros.dataset.validation.lidar import check_cloud_files, check_lidar_manifest
from ortf_ros.dataset.validation.manifest_rules import check_manifest, check_statistics, load_manifest
from ortf_ros.dataset.validation.steps import StepScan
from ortf_ros.dataset.validation.streams import check_streams
from ortf_ros.dataset.validation.tables import Episode, check_episode, check_episode_index, load_episodes, load_tasks
from ortf_ros.dataset.validation.urdf import check_urdf_joints, load_urdf
from ortf_ros.dataset.validation.videos import VideoChecks
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest


def validate(root: str | os.PathLike[str], *, strict: bool = False, episode: str | None = None) -> Report:
    """Check the dataset at ``root``; with ``episode``, only the manifest and that episode.

    ``strict`` makes warnings fail the report and adds the optional checks (video frame
    rate against the sensor's).
    """
    root = Path(root)
    findings: list[Finding] = []
    manifest, found = load_manifest(root)
    findings += found
    if manifest is None:
        return Report(tuple(findings), strict)
    urdf, found = load_urdf(root, manifest)
    findings += found
    findings += check_manifest(manifest, known_links=urdf.links if urdf is not None else ())
    findings += check_lidar_manifest(manifest)
    if urdf is not None:
        findings += check_urdf_joints(manifest, urdf)
    pending, found = check_staging(root, episode)
    findings += found
    episodes, found = load_episodes(root, manifest)
    findings += found
    if episodes is not None:
        findings += _check_episodes(root, manifest, episodes, pending, strict=strict, only_id=episode)
    return Report(tuple(findings), strict)


def _check_episodes(
    root: Path, manifest: Manifest, episodes: list[Episode], pending: set[str], *, strict: bool, only_id: str | None
) -> list[Finding]:
    findings: list[Finding] = []
    tasks, found = load_tasks(root, required=bool(episodes))
    only = None
    if only_id is None:
        findings += found
        findings += check_episode_index(episodes)
        findings += _check_totals(root, manifest, episodes)
        findings += check_stats(root, manifest, has_steps=any(e.record.length > 0 for e in episodes))
        findings += check_annotations(root, manifest, annotation_dirs(root))
    else:
        only = next((e for e in episodes if e.id == only_id), None)
        if only is None:
            return [finding("episode.not_found", layout.EPISODES, f"episode {only_id!r} is not in the dataset")]
        findings += check_annotations(root, manifest, [layout.annotations_dir(only.index)])
    videos = VideoChecks(root, strict=strict)
    frame_counts: dict[str, dict[str, int]] = {}
    for item in [only] if only is not None else episodes:
        findings += check_episode(root, manifest, item, tasks)
        frame_counts[item.id], found = _check_videos(videos, manifest, item)
        findings += found
        findings += check_frames_and_steps(item, frame_counts[item.id], frozenset(manifest.native_streams))
        findings += check_audio(root, manifest, item)
    findings += StepScan(root, manifest, episodes, only=only, pending=pending, frame_counts=frame_counts).run()
    findings += check_streams(root, manifest, episodes, only=only, pending=pending)
    findings += check_cloud_files(root, manifest, [only] if only is not None else episodes)
    return findings


def _check_totals(root: Path, manifest: Manifest, episodes: list[Episode]) -> list[Finding]:
    """The manifest totals against the index; while a delete is interrupted past its commit
    point (``staging.interrupted_delete``), totals that still count its episodes are expected."""
    count, steps = len(episodes), sum(e.record.length for e in episodes)
    seconds = sum(e.record.duration_seconds for e in episodes)
    found = check_statistics(manifest, count, steps, seconds)
    try:
        planned = pending_deletion(root) or []
    except FormatError:
        planned = []  # reported by check_staging
    held = {e.id for e in episodes}
    gone = [p for p in planned if p.episode_id not in held]
    if found and gone:
        steps += sum(p.length for p in gone)
        seconds += sum(p.duration_seconds for p in gone)
        if not check_statistics(manifest, count + len(gone), steps, seconds):
            return []
    return found


def _check_videos(videos: VideoChecks, manifest: Manifest, episode: Episode) -> tuple[dict[str, int], list[Finding]]:
    """The episode's videos, and the frame count of each usable one (for the frame_index rule)."""
    counts = {}
    findings = []
    for camera, sensor in manifest.cameras.items():
        path = episode.record.video_files.get(camera)
        if path is None:
            continue
        info, found = videos.check(path, sensor, episode.id)
        findings += found
        if info is not None:
            counts[camera] = info.frames
    return counts, findings
