"""Audio in the exports: each microphone's episode files copied beside an exported dataset.

Mixtrain has a file reference column type ``audio`` (``sample_rate``, ``channels``); its
column is ``audio`` for the first microphone (the spec's name, as ``audio_file`` is ORTF's)
and ``audio_<name>`` for the others. LeRobot has no audio feature: its export keeps the
files beside the dataset, under ``audio/``, and says so. Either way the WAV goes with its
chunk table (``<file>.chunks.parquet``), which maps its samples to the steps' time.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ortf_ros.dataset.reader import Episode
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ReaderError
from ortf_ros.format.audio import audio_sensors
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor

CHUNKS_SUFFIX = ".chunks.parquet"


def audio_column(manifest: Manifest, sensor: Sensor) -> str:
    """Mixtrain's column of a microphone: ``audio`` for the first, ``audio_<name>`` for the others."""
    return "audio" if audio_sensors(manifest)[0].name == sensor.name else f"audio_{sensor.name}"


def copy_audio(episode: Episode, sensor: Sensor, root: Path, relative_stem: str) -> str | None:
    """The episode's audio file and chunk table of ``sensor`` copied to ``root``/``relative_stem``
    (+ ``.wav`` or ``.mp4``, + ``.chunks.parquet``); the file's relative path, None when the episode has none."""
    audio, table = episode.audio_files(sensor.name)
    if not audio.is_file():
        if episode.record.audio_file is None:
            return None  # (a dataset written before its microphones had files)
        raise ReaderError(f"{audio.relative_to(episode.dataset.root)}: missing (episode {episode.episode_id})")
    relative = f"{relative_stem}{audio.suffix}"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(audio, root / relative)
    if table.is_file():
        shutil.copyfile(table, root / f"{relative_stem}{CHUNKS_SUFFIX}")
    return relative


def audio_type(sensor: Sensor) -> dict[str, Any]:
    """A microphone as a Mixtrain ``audio`` column type (and what an exported file is)."""
    extra = sensor.extra
    found = {key: extra.get(key) for key in ("sample_rate", "channels", "codec", "bit_depth", "sample_format")}
    return {"type": "audio", **{k: v for k, v in found.items() if v is not None}, "chunk_table": CHUNKS_SUFFIX}


LEROBOT_AUDIO_PATH = "audio/{microphone}/episode_{episode_index:06d}"
"""Where the LeRobot export keeps each episode's audio (LeRobot's episode index), + ``.wav``
or ``.mp4``, the chunk table + ``.chunks.parquet``."""


def lerobot_audio_info(manifest: Manifest) -> dict[str, Any]:
    """``info.json``'s ``ortf.audio``: per microphone, where its files are and what they hold."""
    return {
        sensor.name: {
            "path": LEROBOT_AUDIO_PATH.replace("{microphone}", sensor.name)
            + f".{sensor.extra.get('container', 'wav')}",
            **audio_type(sensor),
        }
        for sensor in audio_sensors(manifest)
    }


def import_lerobot_audio(writer: DatasetWriter, root: Path, episode_index: int) -> int:
    """The audio the export kept for LeRobot episode ``episode_index`` (under ``root``)
    staged as the open episode's (``ortf import lerobot``); how many files. A microphone
    whose file is not there keeps an empty one."""
    found = 0
    for sensor in audio_sensors(writer.manifest):
        stem = root / LEROBOT_AUDIO_PATH.format(microphone=sensor.name, episode_index=episode_index)
        audio = stem.with_name(f"{stem.name}.{sensor.extra.get('container', 'wav')}")
        table = stem.with_name(f"{stem.name}{CHUNKS_SUFFIX}")
        if audio.is_file() and table.is_file():
            writer.add_audio_file(sensor.name, audio, table)
            found += 1
    return found


def copy_lerobot_audio(episode: Episode, episode_index: int, root: Path) -> int:
    """The episode's audio files copied where ``LEROBOT_AUDIO_PATH`` says; how many WAVs."""
    copied = 0
    for sensor in audio_sensors(episode.dataset.manifest):
        relative = LEROBOT_AUDIO_PATH.format(microphone=sensor.name, episode_index=episode_index)
        copied += copy_audio(episode, sensor, root, relative) is not None
    return copied
