"""Where each file of an ORTF dataset lives, as one set of path templates.

Every path is relative to the dataset root and uses forward slashes, because the same
strings are stored in ``episodes.parquet`` and must mean the same thing on any OS.
"""

from __future__ import annotations

from typing import Literal

ORTF_VERSION = "0.2"

MANIFEST = "meta/manifest.json"
EPISODES = "meta/episodes.parquet"
TASKS = "meta/tasks.jsonl"
STATS = "meta/stats.json"
# Running statistics (moments and quantile sketches) so that appending episodes
# updates stats.json without re-reading the dataset.
STATS_STATE = "meta/stats_state.json"
ROBOT_DIR = "robot"
URDF = "robot/robot.urdf"
MESHES_DIR = "robot/meshes"
# In-progress episodes live here until they are committed; see ortf_ros.dataset.staging.
STAGING_DIR = ".staging"

DEFAULT_CHUNK_SIZE = 1000


def chunk_dir_name(chunk_id: int) -> str:
    """``chunk-000``; six digits past 999 chunks, as the spec allows for >1M episodes."""
    return f"chunk-{chunk_id:03d}" if chunk_id < 1000 else f"chunk-{chunk_id:06d}"


def steps_path(chunk_id: int) -> str:
    return f"data/{chunk_dir_name(chunk_id)}/steps.parquet"


def episode_file_stem(episode_index: int) -> str:
    return f"episode_{episode_index:06d}"


def video_path(camera: str, chunk_id: int, episode_index: int, suffix: str = ".mp4") -> str:
    return f"videos/{camera}/{chunk_dir_name(chunk_id)}/{episode_file_stem(episode_index)}{suffix}"


def audio_path(microphone: str, chunk_id: int, episode_index: int, suffix: str = ".wav") -> str:
    """A microphone's audio of one episode, laid out like the videos."""
    return f"audio/{microphone}/{chunk_dir_name(chunk_id)}/{episode_file_stem(episode_index)}{suffix}"


def audio_chunks_path(microphone: str, chunk_id: int, episode_index: int) -> str:
    """The table of the messages an episode's audio file was written from, beside it."""
    return audio_path(microphone, chunk_id, episode_index, ".chunks.parquet")


def annotations_dir(episode_index: int) -> str:
    return f"annotations/{episode_file_stem(episode_index)}"


def file_index(episode_id: str, position: int) -> int:
    """Writers name an episode's files after its sequential id (``000042`` ->
    ``episode_000042``); ids of another form fall back to the row position."""
    return int(episode_id) if episode_id.isascii() and episode_id.isdigit() else position


def episode_id_for(episode_index: int) -> str:
    """Sequential episode ids, zero-padded like the spec's ``--episode 000042``."""
    return f"{episode_index:06d}"


def image_column(camera: str) -> str:
    return f"observation.images.{camera}.frame_index"


def state_column(component: str) -> str:
    return f"observation.state.{component}"


StreamFiles = Literal["episode", "chunk"]
STREAM_FILES_KEY = "native_stream_files"
"""Manifest key saying how native-rate streams are filed. ``"episode"``: a Parquet file per
episode and stream, written once at the commit and never touched again, so a commit's cost does
not grow with the chunk (issue 20). ``"chunk"`` (the default when the key is absent): one table
per chunk and stream, as datasets were written before; such datasets keep their layout, and
commits append to those tables (``ortf_ros.io.parquet_append``)."""
STREAM_FILES_PER_EPISODE: StreamFiles = "episode"
STREAM_FILES_PER_CHUNK: StreamFiles = "chunk"


def stream_path(chunk_id: int, stream: str) -> str:
    """Side table of a native-rate stream for the whole chunk (``"chunk"`` layout)."""
    return f"data/{chunk_dir_name(chunk_id)}/streams/{stream}.parquet"


def episode_stream_dir(chunk_id: int, stream: str) -> str:
    return f"data/{chunk_dir_name(chunk_id)}/streams/{stream}"


def episode_stream_path(chunk_id: int, stream: str, episode_index: int) -> str:
    """Samples of one episode of a native-rate stream (``"episode"`` layout), beside the step table."""
    return f"{episode_stream_dir(chunk_id, stream)}/{episode_file_stem(episode_index)}.parquet"


def stream_file(files: StreamFiles, chunk_id: int, stream: str, episode_index: int) -> str:
    """Where an episode's samples of ``stream`` are, in either layout (a chunk table holds others' too)."""
    if files == STREAM_FILES_PER_EPISODE:
        return episode_stream_path(chunk_id, stream, episode_index)
    return stream_path(chunk_id, stream)


def stream_index_column(stream: str) -> str:
    """Step column: index (within the episode) of the stream sample the step used."""
    return f"streams.{stream}.sample_index"


def alignment_column(stream: str) -> str:
    """Step column: |sample time - step time| in milliseconds for the sample the step used."""
    return f"alignment.{stream}_ms"
