"""A microphone's episode audio as the ``AudioStamped`` messages it was recorded from.

Each row of the chunk table (``format.audio``) is one message: its samples read in order
from the episode's file (``audio_codecs.AudioSamples``: WAV, FLAC or AAC), its time the
row's ``timestamp`` on the playback clock. The ROS 2 layout carries them in the array of their type with PortAudio's
format code (``audio_definitions.PORTAUDIO_FORMATS``); 64-bit float samples, which that
layout has no array for, go as float32. Reads a table block and a chunk at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from ortf_ros.dataset.audio_codecs import AudioSamples
from ortf_ros.dataset.reader import Episode
from ortf_ros.format.audio import audio_codec, sensor_format
from ortf_ros.format.sensors import Sensor
from ortf_ros.pipeline.streams.audio_definitions import audio_data_arrays, portaudio_format
from ortf_ros.playback.rosmsg import RosMessages


def audio_stamped(ros: RosMessages, ns: int, frame_id: str, samples: np.ndarray, sensor: Sensor, frames: int) -> Any:
    """An ``audio_common_msgs/AudioStamped`` of ``samples`` (interleaved) in the microphone's
    format (AAC's decoded floats as float32)."""
    fmt = sensor_format(sensor)
    code, field = portaudio_format("f32le" if audio_codec(sensor) == "aac" else fmt.sample_format)
    arrays = audio_data_arrays(samples, field)
    info = ros.new(
        "audio_common_msgs/msg/AudioInfo", format=code, channels=fmt.channels, rate=fmt.sample_rate, chunk=frames
    )
    data = ros.new("audio_common_msgs/msg/AudioData", **arrays)
    audio = ros.new("audio_common_msgs/msg/Audio", audio_data=data, info=info)
    return ros.new("audio_common_msgs/msg/AudioStamped", header=ros.header(ns, frame_id), audio=audio)


def audio_chunks(
    episode: Episode, sensor: Sensor, ros: RosMessages, time_ns: Callable[[float], int], plays_from_s: float
) -> Iterator[tuple[int, Any]]:
    """(time, message) of each chunk of the episode's audio from ``plays_from_s`` on."""
    audio, table = episode.audio_files(sensor.name)
    if not table.is_file():
        return
    with AudioSamples(audio, sensor_format(sensor)) as reader:
        for batch in pq.ParquetFile(table).iter_batches(columns=["timestamp", "sample_count"]):
            rows = batch.to_pydict()
            for timestamp, count in zip(rows["timestamp"], rows["sample_count"], strict=True):
                samples = reader.read(count)  # (in order: the chunks lie end to end)
                if timestamp >= plays_from_s:
                    ns = time_ns(float(timestamp))
                    yield ns, audio_stamped(ros, ns, sensor.name, samples, sensor, count)
