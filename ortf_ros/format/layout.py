"""Where each file of an ORTF dataset lives, as one set of path templates.

Every path is relative to the dataset root and uses forward slashes, because the same
strings are stored in ``episodes.parquet`` and must mean the same thing on any OS.
"""

from __future__ import annotations

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


def stream_path(chunk_id: int, stream: str) -> str:
    """Side table of a native-rate stream, beside the chunk's step table."""
    return f"data/{chunk_dir_name(chunk_id)}/streams/{stream}.parquet"


def stream_index_column(stream: str) -> str:
    """Step column: index (within the episode) of the stream sample the step used."""
    return f"streams.{stream}.sample_index"


def alignment_column(stream: str) -> str:
    """Step column: |sample time - step time| in milliseconds for the sample the step used."""
    return f"alignment.{stream}_ms"
