"""``ortf export mcap``: the messages the player would publish, as one ROS 2 MCAP file.

Foxglove and ``ros2 bag play`` open the file directly, and ``ortf-bag2ortf`` converts
it back (``--write-config`` saves the mapping that reproduces the dataset). Messages
are CDR with ``ros2msg`` schemas, written with rosbags' rosbag2 writer (one MCAP file
in the ``ros2`` profile, chunked and indexed); each message's log time is its time on
the playback timeline, which is also its header stamp. No ROS is needed.

The file is written beside its target and renamed over it when complete, so a failed
export leaves an existing file as it was; what an export killed outright leaves in its
scratch directory is removed by the next export to the same file (``io.scratch``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rosbags.interfaces import Connection, Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import StoragePlugin, Writer

from ortf_ros.errors import ExportError
from ortf_ros.format.manifest import Manifest
from ortf_ros.io import atomic
from ortf_ros.io.scratch import remove_stale, scratch_directory
from ortf_ros.playback.messages import Playlist
from ortf_ros.playback.selection import open_for_playback
from ortf_ros.playback.settings import MessageSettings
from ortf_ros.qos import QosSettings

_INFINITE = QosTime(2147483647, 4294967295)


@dataclass(frozen=True)
class ExportResult:
    path: Path
    episodes: tuple[str, ...]
    counts: dict[str, int]  # topic -> messages
    seconds: float  # span of the log times
    manifest: Manifest  # the exported dataset's: what --write-config builds the mapping from, without a second load
    notes: tuple[str, ...] = ()  # what the file leaves out and why (cameras without CameraInfo)


def rosbags_qos(qos: QosSettings) -> Qos:
    """A stream's QoS as rosbag2 records it (what ``ros2 bag play`` offers again)."""
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=qos.depth,
        reliability=QosReliability.RELIABLE if qos.reliability == "reliable" else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL if qos.durability == "transient_local" else QosDurability.VOLATILE,
        deadline=_INFINITE,
        lifespan=_INFINITE,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=_INFINITE,
        avoid_ros_namespace_conventions=False,
    )


def export_mcap(
    dataset_path: str | Path,
    out: str | Path,
    settings: MessageSettings,
    *,
    episodes: Sequence[str] = (),
    force: bool = False,
    warn: Callable[[str], None],
) -> ExportResult:
    """Write the episodes (all when none are named) to ``out``; ``warn`` hears of skipped frames."""
    target = atomic.replaceable(Path(out))
    if target.is_dir():
        raise ExportError(f"{target}: is a directory; expected the path of the .mcap file to write")
    if target.exists() and not force:
        raise ExportError(f"{target}: exists; pass --force to replace it")
    dataset, ids = open_for_playback(dataset_path, episodes)
    playlist = Playlist(dataset, ids, settings, warn)
    target.parent.mkdir(parents=True, exist_ok=True)
    counts: Counter[str] = Counter()
    first = last = None
    prefix = f".{target.name}.export-"
    remove_stale(target.parent, prefix)  # what exports killed earlier left behind
    with scratch_directory(target.parent, prefix) as scratch:
        bag = scratch / "export"
        writer = Writer(bag, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP)
        writer.open()
        connections: dict[tuple[str, str], Connection] = {}
        try:
            for episode in playlist.play():
                for item in episode.items():
                    key = (item.topic, item.msgtype)
                    if key not in connections:
                        connections[key] = writer.add_connection(
                            item.topic,
                            item.msgtype,
                            typestore=playlist.ros.store,
                            offered_qos_profiles=[rosbags_qos(settings.qos[item.kind])],
                        )
                    writer.write(connections[key], item.time_ns, playlist.ros.serialize(item.message, item.msgtype))
                    counts[item.topic] += 1
                    first = item.time_ns if first is None else first
                    last = item.time_ns
        except BaseException:
            writer.abort()
            raise
        writer.close()
        written = bag / f"{bag.name}.mcap"
        atomic.fsync_file(written)
        os.replace(written, target)
        atomic.fsync_dir(target.parent)
    span = (last - first) / 1e9 if first is not None and last is not None else 0.0
    without_info = playlist.publication.without_info_line()
    notes = (without_info,) if without_info is not None else ()
    return ExportResult(target, tuple(ids), dict(counts), span, dataset.manifest, notes)
