"""The offline source: one recording on disk as a time-ordered stream of ``RawMessage``.

``BagSource`` reads every recording layout a ROS user has, with no ROS install:

- a rosbag2 directory (``metadata.yaml`` + sqlite3 ``.db3`` or ``.mcap`` files), also
  split into several files and compressed per file or per message (zstd);
- a standalone ``.db3`` or ``.mcap`` file, with no ``metadata.yaml`` (also zstd
  compressed, ``.db3.zstd``), and old ones with legacy ``pkg/Type`` names;
- a ROS 1 ``.bag`` (v2.0; plain, bz2 or lz4 chunks), also the legacy ``tf/tfMessage``.

Several paths are one recording split over files (``rosbag record --split``): their
messages are merged by receive time.

A module per storage format reads its files (``base.StorageFile``): ``mcap_file``,
``sqlite_file``, ``ros1_bag``; ``rosbag2_dir`` the directory layer (metadata, split files,
compression), so the files of a split recording are merged by time rather than
concatenated. This module picks a reader by magic number and merges.

A recording cut short (a recorder killed mid-write: an MCAP without summary or footer, a
ROS 1 bag without its index) is read as far as its records are whole
(``mcap_salvage``, ``ros1_bag``); ``salvaged`` says what was read of which file, for the
summary's warning.

Memory is bounded by the storage's chunk size (about 1 MB for rosbags' writers), never by
the length of the recording: messages are read lazily, chunk by chunk or row by row.

Every problem with the input (missing path, unknown format, damaged file, missing split
file) is a ``SourceError`` whose one-line message names the file.
"""

from __future__ import annotations

import heapq
import itertools
import os
import shutil
import tempfile
from collections.abc import Collection, Iterator, Sequence
from contextlib import ExitStack
from operator import itemgetter
from pathlib import Path
from types import TracebackType

from backports import zstd

from ortf_ros.errors import ConversionError, SourceError, UnsupportedSerializationError, describe
from ortf_ros.pipeline.samples import RawBatch, RawMessage, RawRun
from ortf_ros.pipeline.sources.base import (
    ZSTD_MAGIC,
    MessageCompression,
    Salvage,
    StorageFile,
    StoredConnection,
    TopicInfo,
    fail,
)
from ortf_ros.pipeline.sources.mcap_chunks import Batch
from ortf_ros.pipeline.sources.mcap_file import MCAP_MAGIC, McapFile, has_footer
from ortf_ros.pipeline.sources.mcap_salvage import SalvagedMcap
from ortf_ros.pipeline.sources.ros1_bag import ROS1_MAGIC, Ros1Bag
from ortf_ros.pipeline.sources.rosbag2_dir import storage_files
from ortf_ros.pipeline.sources.sqlite_file import SqliteFile

__all__ = ["BATCH_MESSAGES", "BagSource", "Salvage", "TopicInfo"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
BATCH_MESSAGES = 256  # messages per ``BagSource.batches`` batch, where the storage has no chunks to follow


# ---------------------------------------------------------------- the source


def _sniff(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(16)


def _not_a_recording(path: Path, head: bytes) -> str:
    """Why a file is no recording, in the words of what its name promised and what it holds
    (a text file named ``.mcap`` is not "an unknown format", it is not MCAP)."""
    promised = {".mcap": "MCAP", ".db3": "SQLite 3", ".bag": "ROS 1 bag", ".zstd": "zstd"}.get(path.suffix.lower())
    holds = "text" if all(32 <= byte < 127 or byte in b"\t\n\r" for byte in head) else "data of another format"
    if promised:
        article = "an" if promised[0] in "AEIOUMS" else "a"
        return f"not {article} {promised} file (it holds {holds}, without the {promised} signature at its start)"
    return f"not a recording (it holds {holds}); expected a rosbag2 directory, an .mcap, .db3 or ROS 1 .bag file"


class BagSource:
    """One recording as a stream of ``RawMessage`` in receive-time order.

    ``paths``: a rosbag2 directory, ``.mcap``/``.db3`` files, or ROS 1 ``.bag`` files; several
    paths are parts of one recording and are merged by time. Use as a context manager::

        with BagSource([Path("run.mcap")]) as bag:
            for info in bag.topics(): ...
            for msg in bag.messages({"/joint_states"}): ...
    """

    def __init__(self, paths: Path | str | Sequence[Path | str]) -> None:
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not items:
            raise SourceError("no input given: expected a bag file or a rosbag2 directory")
        self.paths = tuple(Path(p) for p in items)
        for path in self.paths:
            if not path.exists():
                raise fail(str(path), "no such file or directory")
        self._stack: ExitStack | None = None
        self._parts: list[StorageFile] = []
        self._topics: list[TopicInfo] | None = None
        self._tmp: Path | None = None

    # -- lifecycle

    def open(self) -> None:
        if self._stack is not None:
            raise SourceError(f"{self.paths[0]}: bag source is already open")
        self._stack = ExitStack()
        try:
            for path in self.paths:
                self._open_path(path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        stack, self._stack = self._stack, None
        self._parts = []
        self._topics = None
        self._tmp = None
        if stack is not None:
            stack.close()

    def __enter__(self) -> BagSource:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _add(self, part: StorageFile) -> None:
        assert self._stack is not None
        self._stack.callback(part.close)
        salvage = part.salvage
        if salvage is not None and not salvage.messages:
            part.close()
            raise fail(part.name, f"{salvage.problem}; no whole message in it")
        self._parts.append(part)

    def _next_key(self) -> int:
        return sum(len(p.conns) for p in self._parts)

    def _tempdir(self) -> Path:
        if self._tmp is None:
            assert self._stack is not None
            self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="ortf-bag-")))
        return self._tmp

    def _open_path(self, path: Path) -> None:
        if path.name == "metadata.yaml" and path.is_file():
            path = path.parent
        if path.is_dir():
            for file, compression in storage_files(path):
                self._open_file(file, str(file), compression)
        else:
            self._open_file(path, str(path), compression="detect")

    def _open_file(self, path: Path, name: str, compression: MessageCompression) -> None:
        try:
            head = _sniff(path)
        except OSError as err:
            raise fail(name, f"cannot read ({err.strerror})") from err
        if not head:
            raise fail(name, "empty file")
        for magic, kind in ((ROS1_MAGIC, "ROS 1 bag"), (MCAP_MAGIC, "MCAP")):
            if len(head) < len(magic) and magic.startswith(head):
                raise fail(
                    name, f"cut short: {len(head)} bytes, not even a whole {kind} signature; no whole message in it"
                )
        if head.startswith(ROS1_MAGIC):
            self._add(Ros1Bag(name, path, self._next_key()))
        elif head.startswith(ZSTD_MAGIC):
            self._open_file(self._decompressed(path, name), name, compression)
        elif head.startswith(MCAP_MAGIC):
            self._open_mcap(self._suffixed(path, ".mcap"), name, compression)
        elif head.startswith(_SQLITE_MAGIC):
            self._add(SqliteFile(name, self._suffixed(path, ".db3"), compression, self._next_key()))
        else:
            raise fail(name, _not_a_recording(path, head))

    def _open_mcap(self, path: Path, name: str, compression: MessageCompression) -> None:
        """An MCAP file through its summary; one without (cut short), or whose summary is
        damaged, by walking its records (``SalvagedMcap``)."""
        size = path.stat().st_size
        with path.open("rb") as f:
            f.seek(max(0, size - len(MCAP_MAGIC)))
            closed = has_footer(size, f.read())
        if closed:
            try:
                self._add(McapFile(name, path, compression, self._next_key()))
                return
            except UnsupportedSerializationError:
                raise
            except ConversionError as err:
                problem = f"its summary cannot be read ({str(err).removeprefix(f'{name}: ')})"
        else:
            problem = "no summary or footer (the recorder did not close it)"
        self._add(SalvagedMcap(name, path, compression, self._next_key(), problem))

    def _suffixed(self, path: Path, suffix: str) -> Path:
        """``path``, or a link to it named with ``suffix``: rosbags picks its storage plugin by suffix."""
        if path.suffix == suffix:
            return path
        link = self._tempdir() / f"{len(self._parts)}_{path.stem}{suffix}"
        link.symlink_to(path.resolve())
        return link

    def _decompressed(self, path: Path, name: str) -> Path:
        stem = path.name[: -len(".zstd")] if path.name.endswith(".zstd") else path.name + ".raw"
        out = self._tempdir() / f"{len(self._parts)}_{stem}"
        try:
            with path.open("rb") as src, zstd.open(src, "rb") as infile, out.open("wb") as outfile:
                shutil.copyfileobj(infile, outfile, 1 << 20)
        except Exception as err:
            raise fail(name, f"zstd-compressed file cannot be decompressed ({describe(err)})") from err
        return out

    # -- queries

    def _check_open(self) -> None:
        if self._stack is None:
            raise SourceError(f"{self.paths[0]}: bag source is not open (use it as a context manager)")

    def topics(self) -> list[TopicInfo]:
        """Every topic, sorted by name; first/last times come from the storage indexes."""
        self._check_open()
        if self._topics is None:
            grouped: dict[tuple[str, str], list[tuple[StoredConnection, tuple[int, int] | None]]] = {}
            for part in self._parts:
                times = part.topic_times()
                for conn in part.conns:
                    grouped.setdefault((conn.topic, conn.msgtype), []).append((conn, times.get(conn.key)))
            infos = []
            for (topic, msgtype), members in sorted(grouped.items()):
                spans = [span for _, span in members if span is not None]
                with_def = [c for c, _ in members if c.definition] or [members[0][0]]
                head = with_def[0]
                infos.append(
                    TopicInfo(
                        topic=topic,
                        msgtype=msgtype,
                        original_msgtype=head.original_msgtype,
                        count=sum(c.count for c, _ in members),
                        first_ns=min(s for s, _ in spans) if spans else None,
                        last_ns=max(e for _, e in spans) if spans else None,
                        definition=head.definition,
                        definition_format=head.definition_format,
                        serialization=head.serialization,
                        digest=head.digest,
                        latched=any(c.latched for c, _ in members),
                    )
                )
            self._topics = infos
        return list(self._topics)

    @property
    def salvaged(self) -> list[Salvage]:
        """The files read only in part, having been cut short (none for a sound recording)."""
        self._check_open()
        return [part.salvage for part in self._parts if part.salvage is not None]

    def salvage_warnings(self) -> list[str]:
        """One line per file read only in part: what is wrong, what was read, what is lost."""
        start = self.start_ns
        lines = []
        for s in self.salvaged:
            until = f", up to {(s.last_ns - start) / 1e9:.3f} s into the recording" if s.last_ns is not None else ""
            lines.append(
                f"{s.name}: read in part ({s.size:,} bytes): {s.problem}. Converted the {s.messages:,} "
                f"messages it holds whole{until}"
            )
        return lines

    def _span(self) -> tuple[int, int] | None:
        self._check_open()
        spans = [s for p in self._parts if (s := p.time_range()) is not None]
        if not spans:
            return None
        return min(s for s, _ in spans), max(e for _, e in spans)

    @property
    def message_count(self) -> int:
        self._check_open()
        return sum(c.count for p in self._parts for c in p.conns)

    @property
    def start_ns(self) -> int:
        """Receive time of the first message (0 for an empty recording)."""
        span = self._span()
        return span[0] if span else 0

    @property
    def end_ns(self) -> int:
        """Receive time of the last message (0 for an empty recording)."""
        span = self._span()
        return span[1] if span else 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def duration(self) -> float:
        """Seconds from the first message to the last."""
        return self.duration_ns / 1e9

    def messages(self, topics: Collection[str] | None = None) -> Iterator[RawMessage]:
        """Messages of ``topics`` (all when None) in receive-time order, read lazily.

        Messages with equal receive times keep their storage order. A topic that the
        recording does not have is a SourceError.
        """
        return self._messages(self._conns(topics))

    def batches(self, topics: Collection[str] | None = None, runs: Collection[str] = ()) -> Iterator[RawBatch]:
        """The messages ``messages`` gives, a batch at a time: an MCAP file's chunk by chunk,
        where the messages of ``runs`` topics come as runs (``RawRun``); other storage
        ``BATCH_MESSAGES`` at a time, without runs."""
        conns = self._conns(topics)
        # (A topic on two connections of a file, with other QoS say, would be two runs whose times interleave.)
        alone = {c.key for p in self._parts for c in p.conns if [o.topic for o in p.conns].count(c.topic) == 1}
        chunked = self._chunked(conns, {key for key in alone & conns.keys() if conns[key].topic in runs})
        if chunked is not None:
            return chunked
        messages = self._messages(conns)
        return (RawBatch(group, []) for group in iter(lambda: list(itertools.islice(messages, BATCH_MESSAGES)), []))

    def _chunked(self, conns: dict[int, StoredConnection], runs: set[int]) -> Iterator[RawBatch] | None:
        """Each part's chunks in turn, when every part has them and the parts follow one
        another in time; else None."""
        parts = sorted(
            ((span, part) for part in self._parts if (span := part.time_range()) is not None), key=itemgetter(0)
        )
        if any(a[1] >= b[0] for (a, _), (b, _) in itertools.pairwise(parts)):
            return None
        chunked = [part.batches(conns.keys(), runs) for _, part in parts]
        if any(batches is None for batches in chunked):
            return None

        def raw(batch: Batch) -> RawBatch:
            messages = []
            for stamp, key, data in batch.messages:
                conn = conns[key]
                messages.append(RawMessage(conn.topic, conn.msgtype, stamp, data, conn.serialization))
            return RawBatch(
                messages,
                [
                    RawRun(conns[r.key].topic, conns[r.key].msgtype, r.times, r.parts, conns[r.key].serialization)
                    for r in batch.runs
                ],
            )

        return (raw(batch) for batches in chunked if batches is not None for batch in batches)

    def _conns(self, topics: Collection[str] | None) -> dict[int, StoredConnection]:
        self._check_open()
        conns = {c.key: c for p in self._parts for c in p.conns}
        if topics is not None:
            unknown = sorted(set(topics) - {c.topic for c in conns.values()})
            if unknown:
                raise fail(str(self.paths[0]), f"no topic {', '.join(unknown)} in the recording")
            conns = {k: c for k, c in conns.items() if c.topic in topics}
        return conns

    def _messages(self, conns: dict[int, StoredConnection]) -> Iterator[RawMessage]:
        streams = [part.messages(conns.keys()) for part in self._parts]
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=itemgetter(0))
        for stamp, key, data in merged:
            conn = conns[key]
            yield RawMessage(conn.topic, conn.msgtype, stamp, data, conn.serialization)
