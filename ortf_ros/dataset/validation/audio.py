"""The ``audio.*`` rules: each episode's audio file and chunk table per microphone
(``format.audio``), against the manifest and each other.

The file exists and is a WAV of the manifest's format (sample rate, channels, bit depth,
float or integer); its chunk table is readable and lays its chunks end to end over the
file's samples (the first at 0, each after the one before, their sample counts adding up
to the file's); the accounting's chunk count is the table's rows; ``audio_file`` is the
first microphone's file.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.audio_files import wav_info
from ortf_ros.dataset.validation.accounting import check_native_stream
from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.dataset.validation.tables import Episode
from ortf_ros.format import layout
from ortf_ros.format.audio import AUDIO_CHUNK_SCHEMA, SAMPLE_FORMATS, audio_sensors, sensor_format
from ortf_ros.format.manifest import Manifest, Sensor


def check_audio(root: Path, manifest: Manifest, episode: Episode) -> list[Finding]:
    """Every microphone's files of one episode."""
    found: list[Finding] = []
    microphones = audio_sensors(manifest)
    if microphones:
        first = layout.audio_path(microphones[0].name, episode.record.chunk_id, episode.index)
        if episode.record.audio_file != first:
            message = f"audio_file is {episode.record.audio_file!r}; expected the first microphone's, {first}"
            found.append(finding("audio.file", layout.EPISODES, message, episode=episode.id, field="audio_file"))
    for sensor in microphones:
        found += _check_microphone(root, sensor, episode)
    return found


def _check_microphone(root: Path, sensor: Sensor, episode: Episode) -> list[Finding]:
    wav = layout.audio_path(sensor.name, episode.record.chunk_id, episode.index)
    table_path = layout.audio_chunks_path(sensor.name, episode.record.chunk_id, episode.index)

    def note(rule: str, file: str, message: str) -> list[Finding]:
        return [finding(rule, file, f"microphone {sensor.name}: {message}", episode=episode.id)]

    if not (root / wav).is_file():
        return note("audio.file", wav, "the episode's audio file is missing")
    try:
        info = wav_info(root / wav)
    except (OSError, ValueError) as exc:
        return note("audio.file", wav, f"not a readable WAV file ({exc})")
    fmt = sensor_format(sensor)
    stored = SAMPLE_FORMATS.get(fmt.sample_format)
    found = (info.sample_rate, info.channels, info.bit_depth, info.is_float)
    if stored is None or found != (fmt.sample_rate, fmt.channels, stored.bit_depth, stored.is_float):
        kind = "float" if info.is_float else "integer"
        return note(
            "audio.format",
            wav,
            f"the file is {info.sample_rate} Hz, {info.channels} channels, {info.bit_depth}-bit {kind}; the manifest "
            f"says {fmt.sample_rate} Hz, {fmt.channels} channels, {fmt.sample_format}",
        )
    try:
        table = pq.read_table(root / table_path, columns=["first_sample", "sample_count"])
    except (OSError, pa.ArrowException) as exc:
        return note("audio.chunks", table_path, f"the chunk table is unreadable ({exc})")
    firsts = table.column("first_sample").to_pylist()
    counts = table.column("sample_count").to_pylist()
    problems = []
    position = 0
    for index, (first, count) in enumerate(zip(firsts, counts, strict=True)):
        if first != position or count < 0:
            problems.append(f"chunk {index} starts at sample {first} with {count} samples; expected it at {position}")
            break
        position += count
    if not problems and position != info.frames:
        problems.append(f"its chunks hold {position} samples, the file {info.frames}")
    found_rows = note("audio.chunks", table_path, problems[0]) if problems else []
    missing = set(AUDIO_CHUNK_SCHEMA.names) - set(pq.read_schema(root / table_path).names)
    if missing:
        found_rows += note("audio.chunks", table_path, f"columns {sorted(missing)} are missing")
    return found_rows + check_native_stream(episode, sensor.name, len(firsts), None)  # (its chunks)
