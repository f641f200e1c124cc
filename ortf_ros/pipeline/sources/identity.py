"""What makes a recording the same recording: its fingerprint, for converting again only
what a dataset does not hold yet.

Why a sampled hash of the content and not the path and modification time (make's and
rsync's quick check): a fleet's recordings are copied to shared storage, synced between
buckets and seen at other mount points on other nodes, and each of these changes the
path or the time of a recording that did not change; the same command run again would
convert it again and duplicate its episodes. Why not a hash of all the content: deciding
what to skip would read every byte of every recording again (ten terabytes at 500 MB/s:
five and a half hours before the first conversion).

So the fingerprint hashes each file's size and its first and last ``SAMPLE_BYTES``. Both
ends of a recording hold what no other recording has: the start holds the storage
header and the first messages with their nanosecond times (an MCAP's first chunk, a ROS 1
bag's first chunk, an SQLite file's first pages), the end the last messages and, in a
finished file, its summary or index with message counts, times and CRCs. A file that
grows (a recording still being written) or is cut changes its size and its end: it is
another recording, and the converter says that its path now holds other content.

Names are left out (a renamed copy is the same recording); a rosbag2 directory is its
data files, in name order. ``metadata.yaml`` is left out too, as ``ros2 bag reindex``
writes it anew for the same data.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ortf_ros.format.metadata import EpisodeSource
from ortf_ros.pipeline.sources.rosbag2_dir import storage_files

SAMPLE_BYTES = 64 * 1024


@dataclass(frozen=True)
class RecordingIdentity:
    """A recording as it is now: where, how big, when last written, and its fingerprint."""

    path: str
    size: int
    mtime_ns: int
    fingerprint: str

    def episode(self, position: int) -> EpisodeSource:
        """The ``source`` of its episode at ``position`` (how many it gives is said at the end)."""
        return EpisodeSource(self.path, self.size, self.mtime_ns, self.fingerprint, position)


def recording_identity(paths: Sequence[Path]) -> RecordingIdentity:
    """The identity of the recording made of ``paths`` (bag files, or a rosbag2 directory;
    several for the parts of one recording). Raises OSError as reading them would, and
    SourceError for a directory that is no rosbag2 recording."""
    files = [file for path in paths for file in _data_files(path)]
    digest = hashlib.blake2b(digest_size=16)
    size = mtime_ns = 0
    for file in files:
        stat = file.stat()
        size += stat.st_size
        mtime_ns = max(mtime_ns, stat.st_mtime_ns)
        digest.update(f"{stat.st_size}\0".encode())
        with open(file, "rb") as stream:
            digest.update(stream.read(SAMPLE_BYTES))
            if stat.st_size > SAMPLE_BYTES:
                stream.seek(max(SAMPLE_BYTES, stat.st_size - SAMPLE_BYTES))
                digest.update(stream.read(SAMPLE_BYTES))
    first = Path(os.path.abspath(paths[0])) if paths else Path()
    return RecordingIdentity(str(first), size, mtime_ns, digest.hexdigest())


def _data_files(path: Path) -> list[Path]:
    """The files a recording's messages are read from: a bag file, or a rosbag2
    directory's storage files (what else a copy gains or loses there, a ``notes.txt``, a
    ``.DS_Store``, does not make it another recording)."""
    if not path.is_dir():
        return [path]
    return [file for file, _ in storage_files(path)]
