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

import av
import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.audio_codecs import AAC_SLACK_FRAMES, probe_audio
from ortf_ros.dataset.validation.accounting import check_native_stream
from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.dataset.validation.tables import Episode
from ortf_ros.format import layout
from ortf_ros.format.audio import (
    AUDIO_CHUNK_SCHEMA,
    SAMPLE_FORMATS,
    audio_codec,
    audio_relative,
    audio_sensors,
    sensor_format,
)
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor
from ortf_ros.io.wav import wav_info


def check_audio(root: Path, manifest: Manifest, episode: Episode) -> list[Finding]:
    """Every microphone's files of one episode."""
    found: list[Finding] = []
    microphones = audio_sensors(manifest)
    if microphones:
        first = audio_relative(microphones[0], episode.record.chunk_id, episode.index)
        if episode.record.audio_file != first:
            message = f"audio_file is {episode.record.audio_file!r}; expected the first microphone's, {first}"
            found.append(finding("audio.file", layout.EPISODES, message, episode=episode.id, field="audio_file"))
    for sensor in microphones:
        found += _check_microphone(root, sensor, episode)
    return found


def _file_format(path: Path, codec: str) -> tuple[int, str]:
    """An audio file's frames, and its rate, channels and kind of samples (WAV) or codec, in words."""
    if codec == "wav":
        info = wav_info(path)
        kind = f"{info.bit_depth}-bit {'float' if info.is_float else 'integer'}"
        return info.frames, f"{info.sample_rate} Hz, {info.channels} channels, {kind}"
    probed = probe_audio(path)
    return probed.frames, f"{probed.sample_rate} Hz, {probed.channels} channels, {probed.codec}"


def _check_microphone(root: Path, sensor: Sensor, episode: Episode) -> list[Finding]:
    wav = audio_relative(sensor, episode.record.chunk_id, episode.index)
    table_path = layout.audio_chunks_path(sensor.name, episode.record.chunk_id, episode.index)

    def note(rule: str, file: str, message: str) -> list[Finding]:
        return [finding(rule, file, f"microphone {sensor.name}: {message}", episode=episode.id)]

    if not (root / wav).is_file():
        return note("audio.file", wav, "the episode's audio file is missing")
    fmt = sensor_format(sensor)
    stored = SAMPLE_FORMATS.get(fmt.sample_format)
    codec = audio_codec(sensor)
    try:
        frames, found = _file_format(root / wav, codec)
    except (OSError, ValueError, av.FFmpegError) as exc:
        return note("audio.file", wav, f"not a readable {codec.upper()} file ({exc})")
    kind = "" if stored is None else f"{stored.bit_depth}-bit {'float' if stored.is_float else 'integer'}"
    expected = f"{fmt.sample_rate} Hz, {fmt.channels} channels, {kind if codec == 'wav' else codec}"
    if stored is None or found != expected:
        message = f"the file is {found}; the manifest says {expected} ({fmt.sample_format} as {codec})"
        return note("audio.format", wav, message)
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
    slack = AAC_SLACK_FRAMES if codec == "aac" else 0  # (AAC's duration is whole frames, less its priming)
    if not problems and abs(position - frames) > slack:
        problems.append(f"its chunks hold {position} samples, the file {frames}")
    found_rows = note("audio.chunks", table_path, problems[0]) if problems else []
    missing = set(AUDIO_CHUNK_SCHEMA.names) - set(pq.read_schema(root / table_path).names)
    if missing:
        found_rows += note("audio.chunks", table_path, f"columns {sorted(missing)} are missing")
    return found_rows + check_native_stream(episode, sensor.name, len(firsts), None)  # (its chunks)
