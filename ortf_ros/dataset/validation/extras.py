"""Rules on the optional and transient parts of a dataset: stats.json, annotations, staging.

None of these can make the data itself wrong, so they warn (stats, annotations) or
inform (staging): an unfinished episode is the normal state after a crash, and the
dataset stays valid until ``ortf recover`` finishes or discards it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import cv2
import numpy as np

from ortf_ros.dataset.deletion import JOURNAL_FILE, pending_deletion
from ortf_ros.dataset.staging import COMMIT_FILE, StagedEpisode, staged_episode_dirs
from ortf_ros.dataset.stats import QUANTILES
from ortf_ros.dataset.validation.files import read_json
from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.scene_objects import SCENE_OBJECTS_FILE, box_problem, default_camera, parse_scene_objects
from ortf_ros.format.schema import vector_columns

STAT_KEYS = ("mean", "std", "min", "max", *QUANTILES)


def check_stats(root: Path, manifest: Manifest, *, has_steps: bool) -> list[Finding]:
    """Normalisation statistics, which trainers read before any step; a feature may lack
    an entry only while the dataset has no steps."""
    file = layout.STATS
    try:
        data = read_json(root, file)
    except FileNotFoundError:
        return [finding("stats.missing", file, "no normalisation statistics; trainers will have to compute them")]
    except ValueError as exc:
        return [finding("stats.invalid", file, str(exc))]
    if not isinstance(data, Mapping):
        return [finding("stats.invalid", file, f"expected an object, got {type(data).__name__}")]
    found = []
    for column, dim in vector_columns(manifest).items():
        entry = data.get(column)
        if entry is None and not has_steps:
            continue
        problem = _stats_entry_problem(entry, dim)
        if problem is not None:
            found.append(finding("stats.invalid", file, problem, field=column))
    return found


def _stats_entry_problem(entry: object, dim: int) -> str | None:
    if not isinstance(entry, Mapping):
        return "no entry for this feature" if entry is None else f"expected an object, got {type(entry).__name__}"
    bad = [key for key in STAT_KEYS if not _is_vector(entry.get(key), dim)]
    return f"{', '.join(bad)} must be lists of {dim} numbers" if bad else None


def _is_vector(value: object, dim: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == dim
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    )


def check_annotations(root: Path, manifest: Manifest, directories: Iterable[str]) -> list[Finding]:
    """Each of ``directories`` (dataset-relative): its scene_objects.json (the spec's shape, the
    boxes inside the annotated camera's frame) and its pictures (they decode)."""
    found = []
    for directory in directories:
        found += _check_scene_objects(root, manifest, f"{directory}/{SCENE_OBJECTS_FILE}")
        for picture in sorted((root / directory).glob("*.jpg")):
            if cv2.imdecode(np.fromfile(picture, np.uint8), cv2.IMREAD_COLOR) is None:
                found.append(finding("annotations.pictures", f"{directory}/{picture.name}", "not a decodable JPEG"))
    return found


def _check_scene_objects(root: Path, manifest: Manifest, file: str) -> list[Finding]:
    try:
        data = read_json(root, file)
    except FileNotFoundError:
        return []
    except ValueError as exc:
        return [finding("annotations.scene_objects", file, str(exc))]
    try:
        objects = parse_scene_objects(data)
    except FormatError as exc:
        return [finding("annotations.scene_objects", file, str(exc))]
    camera = objects.camera or default_camera(manifest)
    sensor = manifest.cameras.get(camera) if camera is not None else None
    if sensor is None or sensor.resolution is None:
        if objects.camera is None:
            return []  # no camera to check the boxes against: a dataset without cameras
        return [finding("annotations.scene_objects", file, f"camera {camera!r} is not in the manifest")]
    problem = box_problem(objects.objects, sensor.resolution.width, sensor.resolution.height)
    return [] if problem is None else [finding("annotations.scene_objects", file, f"camera {camera!r}: {problem}")]


def annotation_dirs(root: Path) -> list[str]:
    base = root / "annotations"
    return sorted(f"annotations/{p.name}" for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def check_staging(root: Path, only: str | None) -> tuple[set[str], list[Finding]]:
    """Ids of episodes whose commit or deletion was interrupted (their rows and files are
    expected without, or with, an index entry), and a note per staged episode and per
    interrupted deletion (only ``only``'s, if given)."""
    pending: set[str] = set()
    found = []
    journal = f"{layout.STAGING_DIR}/{JOURNAL_FILE}"
    try:
        deleting = [p.episode_id for p in pending_deletion(root) or []]
    except FormatError as exc:
        deleting = []
        found.append(finding("staging.interrupted_delete", journal, f"{exc}; run `ortf recover {root}`"))
    deleting = [i for i in deleting if only is None or i == only]
    if deleting:
        pending.update(deleting)
        message = f"deletion of episode(s) {', '.join(deleting)} was interrupted: run `ortf recover {root}`"
        found.append(finding("staging.interrupted_delete", journal, message))
    for directory in staged_episode_dirs(root):
        file = f"{layout.STAGING_DIR}/{directory.name}"
        try:
            episode_id = StagedEpisode(directory).header().episode_id
        except FormatError:
            episode_id = directory.name.removeprefix("episode_")
        if only is not None and episode_id != only:
            continue
        if (directory / COMMIT_FILE).exists():
            pending.add(episode_id)
            message = f"commit of episode {episode_id} was interrupted: run `ortf recover {root}`"
            found.append(finding("staging.interrupted_commit", file, message, episode=episode_id))
        else:
            message = f"unfinished episode {episode_id}: run `ortf recover {root}`"
            found.append(finding("staging.unfinished", file, message, episode=episode_id))
    return pending, found
