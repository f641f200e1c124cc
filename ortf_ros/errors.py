"""The package's exception hierarchy.

Every failure the package anticipates is an ``OrtfError``, so the command-line tools
can catch exactly these, print one line and exit non-zero, while real bugs still
surface with a traceback.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
"""The exit codes of every console script (the README lists them)."""

GET_ROS_2 = (
    "source a ROS 2 install (Humble, Jazzy or Kilted), or pip install ROS 2's wheels from PyPI "
    "('ros-jazzy-rclpy[fastrtps]' and the message packages, Python 3.10-3.12); "
    'see the README, "Install in a ROS 2 workspace"'
)
"""How to get ROS 2: the end of the one line that a part needing it says where rclpy is
missing (the nodes' console scripts, ``ortf demo``'s live part)."""


class OrtfError(Exception):
    """Base class of every error ortf_ros raises on purpose: what the CLI boundary tells in
    one line (``failure_line``) and ends with ``exit_code`` (1; 2 for a usage error)."""

    exit_code: ClassVar[int] = EXIT_FAILED


# ------------------------------------------------------------------ the layers, bottom up
# format -> recording (source) -> mapping -> robot description -> dataset -> export -> usage


class FormatError(OrtfError):
    """A file on disk does not follow ORTF v0.2 (names the file and the field)."""


class ThriftError(FormatError):
    """Bytes that are not compact-protocol Thrift (a Parquet footer damaged on disk):
    ``io/parquet_append`` says it as a FormatError naming the file."""


class ConversionError(OrtfError):
    """A conversion could not be carried out: the parent of the errors of the layers a
    conversion passes through (the recording, the mapping, the robot description, an
    export). Raised as such only where no layer fits; catch it to catch them all."""


class SourceError(ConversionError):
    """A recording (a bag, an MCAP, a live topic) could not be read or decoded: names the
    file or topic and what was found."""


class InvalidMessageError(SourceError):
    """A recorded message whose content is not what its type claims (an empty image, a
    step smaller than a row, joint names without positions): the extractor keeps it as a
    ``BadMessage`` naming the topic and why, counted in the conversion's report, and the
    conversion goes on; it never ends one."""


class AudioError(InvalidMessageError):
    """A message's audio is not what it claims, or not what its microphone's file holds
    (its format changed mid-recording): the chunk is counted as undecodable, with this
    line as the reason."""


class InvalidRangeDataError(InvalidMessageError):
    """A LaserScan or PointCloud2 whose arrays do not fit its own description (more
    intensities than ranges, a field past the point's end): a bad message."""


class UnsupportedSerializationError(SourceError):
    """A storage file whose messages are not in a serialization its reader decodes (a
    rosbag2 connection not in CDR): a fact about the whole file, so no other way of
    reading it (the salvaging scan of an MCAP) is tried."""


class MappingError(ConversionError):
    """The mapping (which recorded topic becomes which stream) is invalid, or does not fit
    the recording: names the file or parameter and the dotted key."""


class ClockOffsetError(MappingError):
    """A recording whose streams' clocks disagree where the mapping does not say how to put
    them on one (``clock_offset_ms``), or whose clock jumped within an episode
    (``pipeline.clock_offsets``): names the topics, their offsets (or the time of the jump)
    and the key that fixes it; nothing of that episode is written."""


class RobotDescriptionError(ConversionError):
    """The robot description (URDF) cannot be read or does not fit the joints."""


class ExportError(ConversionError):
    """A dataset could not be exported or imported to another format (LeRobot, RLDS,
    Mixtrain, MCAP, Rerun): names the target or the source's field."""


class DatasetError(OrtfError):
    """The dataset layer: a dataset could not be written or read."""


class WriterError(DatasetError):
    """The writer was handed data it cannot store, or the target cannot be written."""


class DatasetBusyError(WriterError):
    """Another process writes the dataset (holds its writer lock): nothing this process
    could write there would be taken, so a run over many recordings stops at once."""


class VideoRefusedError(WriterError):
    """An encoded video the writer does not take as it is (stored otherwise, or not cut at
    keyframes): the caller can add its decoded frames instead. A copy that cannot be
    written is a plain WriterError, which no fallback would cure."""


class EmptyEpisodeError(WriterError):
    """An episode with nothing to commit (no staged step whose frames all reached the
    disk): it is discarded, not written."""


class ReaderError(DatasetError):
    """A dataset could not be read (missing or truncated file, unknown episode)."""


class OutsideDatasetError(ReaderError):
    """A path that would leave the dataset (``..``, an absolute path, a symlink pointing
    out), named by the dataset's own index: the review server refuses it (403) rather
    than serve a file from elsewhere."""


class SegmentError(ReaderError):
    """A run of frames cut out of an encoded video (``io/segment.py``) whose packets do
    not decode on their own, or are not all there: the cut is refused (the source read,
    the target untouched), and the caller re-encodes the frames instead."""


def describe(exc: BaseException) -> str:
    """A foreign exception (a library's, an OS error) as one line: its type and message."""
    text = " ".join(str(exc).split()).rstrip(".")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class UsageError(OrtfError):
    """The command line cannot be carried out as given (a flag out of range, a path that is
    missing or of the wrong kind, an unknown episode): exit 2, before anything is written."""

    exit_code: ClassVar[int] = EXIT_USAGE


class SettingsError(UsageError):
    """A setting given to a node or a command (a ROS parameter, a player's or recorder's
    option) is out of its range or of the wrong type: exit 2."""


class UnknownEpisodeError(ReaderError, UsageError):
    """An episode named (by id or position) that the dataset does not hold: a reader's
    error, and on a command line a usage error (exit 2)."""


# ------------------------------------------------------ the servers, nodes and their clients


class HttpError(OrtfError):
    """A request the review server refuses (no such episode, a file outside the dataset,
    a body that is not JSON): answered as ``{"error": line}`` with ``status`` (an HTTP
    status code), while the server goes on."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RecorderError(OrtfError):
    """What a client of the recorder node waited for did not happen (a timeout, the
    recorder gone, a start refused): its caller (the live demo, a test) says it in one line."""


class DemoError(OrtfError):
    """Something the live demo waited for did not happen (a child that did not exit, a
    service refused): one line, then the tails of its children's logs, and exit 1."""


class PlaybackStoppedError(OrtfError):
    """The player was stopped while its producer waited for room in the queue: ends the
    producer thread quietly (caught in ``playback/player.py``); it never reaches a user."""


def exit_code(exc: OrtfError) -> int:
    """The exit code a console script ends with on ``exc``: its class's (2 for a usage
    error, else 1)."""
    return exc.exit_code


def os_error_line(exc: OSError) -> str:
    """``PATH: reason`` (``SRC -> DST: reason`` for a rename), or the reason alone."""
    reason = exc.strerror or describe(exc)
    if exc.filename is not None and exc.filename2 is not None:
        return f"{os.fsdecode(exc.filename)} -> {os.fsdecode(exc.filename2)}: {reason}"
    if exc.filename is not None:
        return f"{os.fsdecode(exc.filename)}: {reason}"
    return reason


def failure_line(exc: BaseException) -> str | None:
    """The one line an anticipated failure is told in (the package's own errors, the
    operating system's, a file that is not the UTF-8 text it must be); None for a bug,
    which keeps its traceback."""
    if isinstance(exc, OrtfError):
        return " ".join(str(exc).split())
    if isinstance(exc, OSError):
        return os_error_line(exc)
    if isinstance(exc, UnicodeError):
        return f"not UTF-8 text where text was expected ({exc})"
    return None


def with_filename(exc: OSError, filename: os.PathLike[str] | str) -> OSError:
    """``exc`` naming ``filename`` instead (the same subclass: EPIPE stays a BrokenPipeError)."""
    return OSError(exc.errno, exc.strerror, os.fspath(filename))


@contextmanager
def naming(path: os.PathLike[str] | str) -> Iterator[None]:
    """An OSError that names no file (a full disk says only "No space left on device")
    names ``path``, where the block was writing."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise with_filename(exc, path) from exc
        raise
