"""Audio: ``audio_common_msgs`` messages -> the samples published, and what a microphone is.

Two layouts share the package name ``audio_common_msgs``, and recordings hold either:

- the ROS 2 one (mgonzs13/audio_common): ``AudioStamped`` = a header and an ``Audio``,
  which holds an ``AudioData`` (one array per sample type: ``float32_data``, ``int32_data``,
  ``int24_data``, ``int16_data``, ``int8_data``, ``uint8_data``) and an ``AudioInfo``
  (``format``, a PortAudio sample format code; ``channels``; ``rate``; ``chunk``). Each
  message says its own format.
- the older one (ros-drivers/audio_common, ROS 1 and its ports): ``AudioData`` (``uint8[]
  data``, no header) or ``AudioDataStamped`` (a header and an ``AudioData``), described by
  ``AudioInfo`` messages on a topic of their own (``channels``, ``sample_rate``,
  ``sample_format`` a GStreamer name such as ``S16LE``, ``coding_format``).

Fields are read by name from the decoded message, so the order a recording's definition
gives them in does not matter. Samples stay as published: the file holds these values in
this order (``dataset.audio_files``), channels interleaved. Only uncompressed audio is
taken; an mp3-coded stream is a bad message naming the coding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ortf_ros.errors import AudioError, MappingError, SourceError
from ortf_ros.format.audio import FLAC_FORMATS, SAMPLE_FORMATS, AudioFormat, audio_sensor, audio_sensors, sensor_format
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor
from ortf_ros.format.units import NS
from ortf_ros.io.wav import packed_24bit
from ortf_ros.pipeline.mapping import AudioMapping, TimeSource, TopicMapping
from ortf_ros.pipeline.samples import (
    AudioChunkSample,
    AudioInfoSample,
    Sample,
    Stamps,
)
from ortf_ros.pipeline.streams.audio_definitions import PORTAUDIO_FORMATS

if TYPE_CHECKING:
    from ortf_ros.dataset.writer import DatasetWriter


_GSTREAMER_FORMATS: dict[str, tuple[str, str, int]] = {
    # GStreamer name -> (sample format, dtype of the bytes, bytes per sample)
    "U8": ("u8", "u1", 1),
    "S8": ("s8", "i1", 1),
    "S16LE": ("s16le", "<i2", 2),
    "S16BE": ("s16le", ">i2", 2),
    "S24LE": ("s24le", "<", 3),
    "S24BE": ("s24le", ">", 3),
    "S32LE": ("s32le", "<i4", 4),
    "S32BE": ("s32le", ">i4", 4),
    "F32LE": ("f32le", "<f4", 4),
    "F32BE": ("f32le", ">f4", 4),
    "F64LE": ("f64le", "<f8", 8),
    "F64BE": ("f64le", ">f8", 8),
}
"""The older layout's ``sample_format`` names (GStreamer's): big-endian samples are kept
little-endian (the same values), 24-bit packed ones held in int32."""
_UNCOMPRESSED_CODINGS = frozenset({"", "wave", "wav", "pcm", "raw", "audio/x-raw"})


def _array(values: object, dtype: np.dtype[Any]) -> np.ndarray:
    if isinstance(values, (bytes, bytearray, memoryview)):
        return np.frombuffer(values, dtype=dtype)
    return np.asarray(values).reshape(-1).astype(dtype, copy=False)


def _positive(value: Any, what: str) -> int:
    number = int(value)
    if number <= 0:
        raise AudioError(f"{what} is {number}; expected a positive number")
    return number


AudioHandler = Callable[[Any, str, Stamps], list[Sample]]
"""A decoded message, its topic and its stamps (``extract._stamps``) -> its samples."""


def stamped_audio(msg: Any, topic: str, stamps: Stamps) -> list[Sample]:
    """The ROS 2 layout: ``AudioStamped`` (or an unstamped ``Audio``)."""
    audio = msg.audio if hasattr(msg, "header") else msg
    info = audio.info
    data = getattr(audio, "audio_data", None)
    if data is None:
        data = audio.audio  # (a definition that names the AudioData field ``audio``)
    code = int(info.format)
    if code not in PORTAUDIO_FORMATS:
        known = ", ".join(f"{c} ({name})" for c, (name, _) in PORTAUDIO_FORMATS.items())
        raise AudioError(f"audio.info.format is {code}; expected a PortAudio sample format: {known}")
    name, field = PORTAUDIO_FORMATS[code]
    samples = _array(getattr(data, field), SAMPLE_FORMATS[name].dtype)
    if not len(samples):
        filled = [f for _, f in PORTAUDIO_FORMATS.values() if len(getattr(data, f, ()))]
        if filled:
            raise AudioError(f"audio.info.format {code} says {field}, which is empty; {filled[0]} holds the samples")
    fmt = AudioFormat(name, _positive(info.channels, "audio.info.channels"), _positive(info.rate, "audio.info.rate"))
    if len(samples) % fmt.channels:
        raise AudioError(f"{len(samples)} samples are not a whole number of {fmt.channels}-channel frames")
    return [AudioChunkSample(topic, stamps, samples, fmt)]


def audio_bytes(msg: Any, topic: str, stamps: Stamps) -> list[Sample]:
    """The older layout: ``AudioData`` bytes, or ``AudioDataStamped``; the format comes
    from the ``AudioInfo`` topic (``from_bytes``)."""
    data = msg.audio.data if hasattr(msg, "header") else getattr(msg, "data", None)
    if data is None:
        raise AudioError("an AudioData of the ROS 2 layout without its AudioInfo: publish AudioStamped")
    return [AudioChunkSample(topic, stamps, _array(data, np.dtype(np.uint8)), None)]


def audio_info(msg: Any, topic: str, stamps: Stamps) -> list[Sample]:
    """The older layout's ``AudioInfo``: the bytes' format, its GStreamer name kept."""
    sample_format = getattr(msg, "sample_format", None)
    if sample_format is None:
        return []  # (the ROS 2 layout's AudioInfo alone describes no topic)
    coding = str(msg.coding_format).strip().lower()
    if coding not in _UNCOMPRESSED_CODINGS:
        raise AudioError(f"coding_format is {msg.coding_format!r}; only uncompressed audio (wave) can be kept")
    name = str(sample_format).strip().upper()
    if name not in _GSTREAMER_FORMATS:
        raise AudioError(f"sample_format is {sample_format!r}; expected one of {', '.join(_GSTREAMER_FORMATS)}")
    channels = _positive(msg.channels, "channels")
    rate = _positive(msg.sample_rate, "sample_rate")
    return [AudioInfoSample(topic, stamps, AudioFormat(name, channels, rate))]


def stored_format(fmt: AudioFormat) -> AudioFormat:
    """The format samples are held and stored in: the older layout's GStreamer name as
    the sample format it becomes (``S16BE`` -> ``s16le``)."""
    if fmt.sample_format in _GSTREAMER_FORMATS:
        return AudioFormat(_GSTREAMER_FORMATS[fmt.sample_format][0], fmt.channels, fmt.sample_rate)
    return fmt


def from_bytes(data: np.ndarray, described: AudioFormat) -> np.ndarray:
    """The older layout's bytes as samples of ``described`` (an ``AudioInfo``'s format)."""
    name, dtype, width = _GSTREAMER_FORMATS[described.sample_format]
    frame_bytes = width * described.channels
    if len(data) % frame_bytes:
        raise AudioError(
            f"{len(data)} bytes are not a whole number of {described.sample_format} "
            f"{described.channels}-channel frames ({frame_bytes} bytes each)"
        )
    if width == 3:  # packed 24-bit: sign-extend into int32
        return packed_24bit(np.ascontiguousarray(data), big_endian=dtype != "<")
    return np.frombuffer(data.tobytes() if not data.flags.c_contiguous else data, dtype=dtype).astype(
        SAMPLE_FORMATS[name].dtype, copy=False
    )


# ---------------------------------------------------------------- what a microphone is


def learn_format(formats: dict[str, AudioFormat], config: TopicMapping, topic: str, sample: Sample) -> None:
    """The prologue's part: each microphone's format, from its first chunk (the ROS 2
    layout) or its first ``AudioInfo`` (the older one). ``formats``: name -> format."""
    for mapping in config.audio:
        found = None if mapping.name in formats else _format_of(sample, topic, mapping)
        if found is not None:
            formats[mapping.name] = found


def _format_of(sample: Sample, topic: str, mapping: AudioMapping) -> AudioFormat | None:
    if isinstance(sample, AudioChunkSample):
        return sample.format if topic == mapping.topic else None
    if isinstance(sample, AudioInfoSample):
        return sample.format if topic in mapping.info_topics else None
    return None


def prologue_topics(config: TopicMapping) -> set[str]:
    """The topics a microphone's format comes from."""
    return {t for a in config.audio for t in (a.topic, *a.info_topics)}


def lacking(config: TopicMapping, formats: Mapping[str, AudioFormat], present: frozenset[str]) -> list[str]:
    """What the prologue still waits for: the format of each microphone that delivers."""
    return [f"no audio format yet on {a.topic}" for a in config.audio if a.topic in present and a.name not in formats]


def require_format(
    mapping: AudioMapping, formats: Mapping[str, AudioFormat], problems: Mapping[str, str] | None = None
) -> AudioFormat:
    """The microphone's format, or the line that says why it is unknown (``problems``:
    topic -> why a message of it was not read, the first one)."""
    found = formats.get(mapping.name)
    if found is None:
        seen = [problems[t] for t in (mapping.topic, *mapping.info_topics) if problems and t in problems]
        raise SourceError(
            f"audio {mapping.name}: {mapping.topic}: its format is unknown: "
            + (seen[0] if seen else "no AudioStamped message, and no AudioInfo on ")
            + ("" if seen else f"{' or '.join(mapping.info_topics)} (set audio.{mapping.name}.info_topic)")
        )
    return found


def describe_audio(
    config: TopicMapping, formats: Mapping[str, AudioFormat], problems: Mapping[str, str] | None = None
) -> list[Sensor]:
    """The manifest's microphones, in mapping order (the first one's file is ``audio_file``)."""
    sensors = []
    for mapping in config.audio:
        found = require_format(mapping, formats, problems)
        stored = stored_format(found)
        if mapping.codec == "flac" and stored.sample_format not in FLAC_FORMATS:
            raise MappingError(
                f"audio {mapping.name}: {mapping.topic}: codec flac keeps integers of at most 24 bits exactly, and the "
                f"microphone's samples are {stored.sample_format}: use codec wav (lossless) or aac (lossy)"
            )
        sensor = audio_sensor(mapping.name, stored, source=mapping.topic, layout="AudioStamped", codec=mapping.codec)
        if found.sample_format in _GSTREAMER_FORMATS:  # the older layout: bytes described by an AudioInfo
            layout = {"message_type": "AudioData", "source_sample_format": found.sample_format}
            sensor = replace(sensor, extra={**sensor.extra, **layout})
        sensors.append(sensor)
    return sensors


class AudioRouter:
    """An episode's audio on its way to the writer: each chunk's samples appended to its
    microphone's file, as published, with its time (``stream_time`` of the mapping's time
    source: ``time_of`` is ``samples.stream_time``) on the steps' clock (``clock_ns``:
    ``NativeBatching.clock_ns``). The format is the
    manifest's; a message in another one is not written (the file has one format): the
    assembler counts it as undecodable, with the reason."""

    def __init__(
        self,
        config: TopicMapping,
        manifest: Manifest,
        writer: DatasetWriter,
        clock_ns: Callable[[int], int],
        time_of: Callable[[Stamps, TimeSource], int],
    ) -> None:
        sensors = {s.name: s for s in audio_sensors(manifest)}
        self._microphones = {a.topic: (a, sensors[a.name]) for a in config.audio if a.name in sensors}
        self._info_topics = {t for a, _ in self._microphones.values() for t in a.info_topics}
        self.writer = writer
        self._clock_ns = clock_ns
        self._time_of = time_of

    def route(self, sample: AudioChunkSample | AudioInfoSample, topic: str) -> bool:
        """Whether the sample was used (written, or an AudioInfo of a microphone's);
        AudioError when its samples cannot be what the file holds (the caller counts it)."""
        if isinstance(sample, AudioInfoSample):
            return topic in self._info_topics
        found = self._microphones.get(topic)
        if found is None:
            return False
        mapping, sensor = found
        samples = self._samples(sample, sensor, sensor_format(sensor))
        time_ns = self._time_of(sample.stamps, mapping.time)
        stamps = sample.stamps
        timestamp = (time_ns - self._clock_ns(time_ns)) / NS
        self.writer.add_audio(
            mapping.name, samples, timestamp, time_ns=time_ns, stamp_ns=stamps.header_ns, receive_ns=stamps.receive_ns
        )
        return True

    @staticmethod
    def _samples(sample: AudioChunkSample, sensor: Sensor, stored: AudioFormat) -> np.ndarray:
        if sample.format is None:
            source = sensor.extra.get("source_sample_format")
            if not isinstance(source, str) or source not in _GSTREAMER_FORMATS:
                raise AudioError("AudioData bytes, but the microphone was recorded from AudioStamped messages")
            return from_bytes(sample.samples, AudioFormat(source, stored.channels, stored.sample_rate))
        if stored_format(sample.format) != stored:
            raise AudioError(
                f"the format changed from {stored.sample_format} {stored.channels} ch {stored.sample_rate} Hz to "
                f"{sample.format.sample_format} {sample.format.channels} ch {sample.format.sample_rate} Hz"
            )
        return sample.samples
