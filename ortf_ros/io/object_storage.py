"""A dataset in object storage: an ``s3://bucket/prefix`` URL read as a ``Storage``
(``format/stored_files.py`` has the interface and the local directory).

The reader asks a storage for each file by its path relative to the dataset root: its
bytes (the manifest, the tasks), or a random-access file (Parquet tables, videos) that the
Parquet reader and PyAV read by ranges. Here that goes through pyarrow's S3 filesystem: a
``RangeFile`` fetches only the blocks asked for (a Parquet footer and the column chunks read,
the part of a video PyAV demuxes), never a whole object first.

Blocks, not the reads themselves, go to the network: PyAV reads 32 KiB at a time and Parquet
a few bytes of footer length before the footer, and each would be an HTTP request. A file
keeps its last few blocks in memory (``memory_blocks``: the bound on what an open file
holds), and with a cache directory every block fetched is kept on disk, so that a second
epoch reads from there without a request.

Fork safety: a DataLoader worker forked from a process that opened the dataset must not use
its parent's S3 client (the AWS SDK's connections and threads do not survive a fork). The
filesystem and every remote file are made per process, keyed by ``os.getpid()``: a child
makes its own on its first read. The parent's are kept referenced in the child, never
destroyed there (their destructors would talk to connections that belong to the parent).
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from ortf_ros.errors import ReaderError, describe
from ortf_ros.format.stored_files import Storage

log = logging.getLogger(__name__)

BLOCK_BYTES = 1 << 20
"""What one request fetches at least (1 MiB): a frame's worth of a 640x480 H.264 video many
times over, a step table's footer with its column chunks for small datasets."""

MEMORY_BLOCKS = 4
"""Blocks an open remote file keeps in memory: the bound on its memory (4 MiB at 1 MiB)."""

CONNECT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 30.0
ATTEMPTS = 2
"""An endpoint that does not answer fails in seconds, not after the SDK's minutes of retries."""

_KNOWN_OBJECTS = 4096
"""Objects whose size and time a storage remembers (an LRU): one request per file opened,
not one per read, with memory bounded whatever the number of files."""


@dataclass
class FetchCounts:
    """What a storage fetched from the network in this process (its blocks from the cache
    directory apart): what tests and benchmarks check ranges and the cache by."""

    requests: int = 0
    bytes: int = 0
    cached_blocks: int = 0


@dataclass(frozen=True)
class S3Settings:
    """How the S3 endpoint is reached: the AWS SDK's standard environment variables, read once."""

    endpoint: str | None = None  # host[:port], with ``scheme``; None: AWS itself
    scheme: str = "https"
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None

    @classmethod
    def from_environment(cls) -> S3Settings:
        """AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or
        AWS_DEFAULT_REGION) and AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL). pyarrow 26 reads
        neither endpoint variable itself (it went to amazonaws.com with them set), so the
        endpoint is passed as ``endpoint_override``."""
        environ = os.environ
        endpoint_url = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
        endpoint, scheme = None, "https"
        if endpoint_url:
            parts = urlsplit(endpoint_url if "://" in endpoint_url else f"https://{endpoint_url}")
            endpoint, scheme = parts.netloc + parts.path.rstrip("/"), parts.scheme or "https"
        return cls(
            endpoint=endpoint,
            scheme=scheme,
            region=environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION"),
            access_key=environ.get("AWS_ACCESS_KEY_ID") or None,
            secret_key=environ.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=environ.get("AWS_SESSION_TOKEN") or None,
        )

    def filesystem(self) -> pafs.FileSystem:
        options: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            "request_timeout": REQUEST_TIMEOUT_S,
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=ATTEMPTS),
            "scheme": self.scheme,
        }
        if self.endpoint is not None:
            options["endpoint_override"] = self.endpoint
        if self.region is not None:
            options["region"] = self.region
        if self.access_key is not None and self.secret_key is not None:
            options.update(access_key=self.access_key, secret_key=self.secret_key, session_token=self.session_token)
        return pafs.S3FileSystem(**options)

    @property
    def where(self) -> str:
        """The endpoint as a line names it, and what the cache keys objects under."""
        return f"{self.scheme}://{self.endpoint}" if self.endpoint else f"aws:{self.region or 'default'}"


class ObjectStorage(Storage):
    """A dataset under ``s3://bucket/prefix``, read through pyarrow's S3 filesystem by ranges
    (``RangeFile``), with an optional local cache directory of the blocks fetched.

    Objects are taken as not changing while a storage has them open: a file's size and time
    are asked once (and remembered), not before every read as a local file's are. A replaced
    object is seen by the next storage opened on the URL (a new ``load_dataset``, a worker
    process), and its cached blocks, keyed by its size and time, are not served for it.
    """

    def __init__(
        self,
        url: str,
        cache_dir: Path | None = None,
        *,
        settings: S3Settings | None = None,
        block_bytes: int = BLOCK_BYTES,
        memory_blocks: int = MEMORY_BLOCKS,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise ReaderError(f"{url}: not an object storage URL this reader takes; expected s3://bucket/prefix")
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        self.location = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.settings = settings if settings is not None else S3Settings.from_environment()
        self.cache = BlockCache(cache_dir) if cache_dir is not None else None
        self.block_bytes = block_bytes
        self.memory_blocks = memory_blocks
        self.counts = FetchCounts()
        self._filesystem: pafs.FileSystem | None = None
        self._pid = -1
        self._known: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self.inherited: list[object] = []  # a forked child's references to its parent's client and files

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a spawned worker's copy) without the process's client, files or counts."""
        state = dict(self.__dict__)
        state.update(_filesystem=None, _pid=-1, _known=OrderedDict(), inherited=[], counts=FetchCounts())
        return state

    def filesystem(self) -> pafs.FileSystem:
        """This process's S3 client: made on first use, and anew in a forked child."""
        if self._pid != os.getpid():
            if self._filesystem is not None:
                self.inherited.append(self._filesystem)
            self._filesystem = self.settings.filesystem()
            self._pid = os.getpid()
        assert self._filesystem is not None
        return self._filesystem

    def key(self, relative: str) -> str:
        """The object's path as pyarrow names it (``bucket/prefix/relative``)."""
        return "/".join(part for part in (self.bucket, self.prefix, relative) if part)

    def name(self, relative: str) -> str:
        return f"{self.location}/{relative}"

    def failure(self, exc: OSError, relative: str | None = None) -> ReaderError:
        """The one line an S3 error is told in: the URL, then what went wrong in words."""
        where = self.name(relative) if relative else self.location
        return ReaderError(f"{where}: {s3_reason(str(exc), self.settings.where)}")

    def object_info(self, relative: str) -> tuple[int, int]:
        """(size, mtime_ns) of the object, asked once; FileNotFoundError when there is none."""
        known = self._known.pop(relative, None)
        if known is None:
            try:
                info = self.filesystem().get_file_info(self.key(relative))
            except OSError as exc:
                raise self.failure(exc, relative) from None
            if info.type != pafs.FileType.File:
                raise FileNotFoundError(errno.ENOENT, "no such object", self.name(relative))
            known = (int(info.size or 0), int(info.mtime_ns or 0))
        self._known[relative] = known
        while len(self._known) > _KNOWN_OBJECTS:
            self._known.popitem(last=False)
        return known

    def check(self, manifest: str) -> None:
        """The bucket and the dataset's manifest are there (one line naming the URL if not)."""
        try:
            self.object_info(manifest)
        except FileNotFoundError:
            try:
                bucket = self.filesystem().get_file_info(self.bucket)
            except OSError as exc:
                raise self.failure(exc) from None
            if bucket.type == pafs.FileType.NotFound:
                raise ReaderError(f"{self.location}: no bucket {self.bucket!r} at {self.settings.where}") from None
            raise ReaderError(f"{self.location}: no ORTF dataset there ({manifest} is missing)") from None

    def read_bytes(self, relative: str) -> bytes:
        with self.source(relative) as file:
            return file.read()

    def exists(self, relative: str) -> bool:
        try:
            self.object_info(relative)
        except FileNotFoundError:
            return False
        return True

    def source(self, relative: str) -> RangeFile:
        size, mtime_ns = self.object_info(relative)
        return RangeFile(self, relative, size, mtime_ns)

    def identity(self, relative: str) -> Hashable:
        return self.object_info(relative)

    def open_remote(self, relative: str) -> pa.NativeFile:
        try:
            return self.filesystem().open_input_file(self.key(relative))
        except FileNotFoundError:
            raise ReaderError(f"{self.name(relative)}: gone from object storage while being read") from None
        except OSError as exc:
            raise self.failure(exc, relative) from None


_REASONS = (
    (("NETWORK_CONNECTION", "curlCode"), "cannot reach the endpoint {where}"),
    (("SignatureDoesNotMatch", "InvalidAccessKeyId", "ACCESS_DENIED", "AccessDenied", "HTTP status 403"),
     "access refused (see AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)"),
    (("NoSuchBucket", "NO_SUCH_BUCKET"), "no such bucket at {where}"),
)  # fmt: skip


def s3_reason(message: str, where: str) -> str:
    """An AWS error (pyarrow's several lines of SDK detail) in a few words, with the detail
    that tells it from the others: the line names the cause, not the SDK call."""
    detail = " ".join(message.split())
    for markers, reason in _REASONS:
        if any(marker in detail for marker in markers):
            return f"{reason.format(where=where)}: {_aws_detail(detail)}"
    return detail


def _aws_detail(detail: str) -> str:
    """The part of pyarrow's message after "AWS Error": the SDK's code and the server's words."""
    _, found, rest = detail.partition("AWS Error ")
    return (rest if found else detail)[:200]


class RangeFile(io.RawIOBase):
    """An object read by ranges, a block at a time (``BLOCK_BYTES``), its last blocks kept in
    memory (``memory_blocks``) and every block in the storage's cache directory if it has
    one: what ``pq.ParquetFile`` and ``av.open`` are given for a file in object storage.

    A read that wants several blocks none of which is at hand fetches them in one request
    (a Parquet column chunk of many megabytes is one ranged GET, not one per block). The
    remote file is opened on the first block not found in the cache, in this process: a
    forked child opens its own.
    """

    def __init__(self, storage: ObjectStorage, relative: str, size: int, mtime_ns: int) -> None:
        super().__init__()
        self.storage = storage
        self.relative = relative
        self.size = size
        self.version = (size, mtime_ns)
        self.name = storage.name(relative)
        self._position = 0
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._remote: pa.NativeFile | None = None
        self._pid = -1

    # -------------------------------------------------------------- the io interface
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, f"negative seek position {base + offset}", self.name)
        self._position = base + offset
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError(f"{self.name}: read from a closed file")
        end = self.size if size is None or size < 0 else min(self.size, self._position + size)
        data = self.read_at(self._position, end - self._position) if end > self._position else b""
        self._position += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(memoryview(buffer)))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if self._remote is not None and self._pid == os.getpid():
            self._remote.close()
        self._remote = None
        self._blocks.clear()
        super().close()

    # -------------------------------------------------------------- the blocks
    def read_at(self, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset`` (within the object), assembled from its blocks."""
        size = self.storage.block_bytes
        first, last = offset // size, (offset + length - 1) // size
        blocks = {index: self._block_at_hand(index) for index in range(first, last + 1)}
        missing = [index for index, block in blocks.items() if block is None]
        for start, stop in _runs(missing):
            blocks.update(self._fetch(start, stop))
        data = b"".join(blocks[index] or b"" for index in range(first, last + 1))
        skip = offset - first * size
        return data[skip : skip + length]

    def _block_at_hand(self, index: int) -> bytes | None:
        block = self._blocks.get(index)
        if block is not None:
            self._blocks.move_to_end(index)
            return block
        cache = self.storage.cache
        if cache is not None:
            block = cache.get(self._cache_key(), index, self._block_length(index))
            if block is not None:
                self.storage.counts.cached_blocks += 1
                self._keep(index, block)
        return block

    def _block_length(self, index: int) -> int:
        return min(self.storage.block_bytes, self.size - index * self.storage.block_bytes)

    def _fetch(self, first: int, last: int) -> dict[int, bytes]:
        """Blocks ``first`` to ``last`` (inclusive) in one ranged request."""
        size = self.storage.block_bytes
        start, stop = first * size, min(self.size, (last + 1) * size)
        try:
            data = self._remote_file().read_at(stop - start, start)
        except OSError as exc:
            raise self.storage.failure(exc, self.relative) from None
        if len(data) != stop - start:
            raise ReaderError(f"{self.name}: {len(data)} bytes where {stop - start} were asked (replaced while read?)")
        self.storage.counts.requests += 1
        self.storage.counts.bytes += len(data)
        fetched = {}
        for index in range(first, last + 1):
            block = data[(index - first) * size : (index - first + 1) * size]
            if self.storage.cache is not None:
                self.storage.cache.put(self._cache_key(), index, block)
            self._keep(index, block)
            fetched[index] = block
        return fetched

    def _keep(self, index: int, block: bytes) -> None:
        self._blocks[index] = block
        while len(self._blocks) > self.storage.memory_blocks:
            self._blocks.popitem(last=False)

    def _remote_file(self) -> pa.NativeFile:
        if self._pid != os.getpid():
            if self._remote is not None:
                self.storage.inherited.append(self._remote)
            self._remote = self.storage.open_remote(self.relative)
            self._pid = os.getpid()
        assert self._remote is not None
        return self._remote

    def _cache_key(self) -> ObjectVersion:
        return ObjectVersion(
            f"{self.storage.settings.where}\n{self.storage.key(self.relative)}", *self.version, self.storage.block_bytes
        )


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted block numbers as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for index in indices:
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs


@dataclass(frozen=True)
class ObjectVersion:
    """An object as fetched: its endpoint and key, its size and time, and the block size."""

    key: str
    size: int
    mtime_ns: int
    block_bytes: int

    @property
    def directory(self) -> str:
        """The object's directory: a hash of endpoint and key (any key is a valid name then)."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:32]

    @property
    def version(self) -> str:
        return f"{self.size}-{self.mtime_ns}-{self.block_bytes}"


class BlockCache:
    """A directory of blocks fetched, one file each: ``<object>/<size>-<mtime>-<block size>/<n>``.

    Several processes (DataLoader workers) share one safely: a block is written to a temporary
    file of its own, synced and renamed into place, so a reader sees a whole block or none, and
    two writers of the same block both put the same bytes there. Nothing else is shared, so
    there is no index to keep consistent. (fsspec's ``blockcache`` keeps one JSON index per
    cache directory, rewritten by read-merge-write without a lock, so two processes lose each
    other's entries, and each object's blocks in one sparse file that ``MMapCache._makefile``
    creates with ``open(path, "wb+")`` when it sees none: a second process truncates what the
    first wrote (fsspec 2026.9, ``implementations/cache_metadata.py`` and ``caching.py``).)

    An object replaced in the bucket has another size or time, so its old blocks are not
    served for it; they are removed when its first new block is written. The directory is
    not synced after a rename: a block lost to a power cut is fetched again. A block that
    cannot be written (a full disk) is logged once and read from the network next time.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._warned = False

    def _path(self, version: ObjectVersion, index: int) -> Path:
        return self.root / version.directory / version.version / str(index)

    def get(self, version: ObjectVersion, index: int, length: int) -> bytes | None:
        try:
            data = self._path(version, index).read_bytes()
        except OSError:
            return None
        return data if len(data) == length else None

    def put(self, version: ObjectVersion, index: int, data: bytes) -> None:
        target = self._path(version, index)
        try:
            if not target.parent.is_dir():
                self._drop_other_versions(target.parent)
                target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{index}.", suffix=".tmp")
            try:
                with os.fdopen(handle, "wb") as file:
                    file.write(data)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            if not self._warned:
                log.warning("%s: blocks are not cached: %s", self.root, describe(exc))
                self._warned = True

    @staticmethod
    def _drop_other_versions(version_dir: Path) -> None:
        if not version_dir.parent.is_dir():
            return
        for other in version_dir.parent.iterdir():
            if other != version_dir:
                shutil.rmtree(other, ignore_errors=True)
