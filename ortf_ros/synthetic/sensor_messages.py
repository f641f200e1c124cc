"""The lidar's and the microphone's messages (their values: ``lidar``, ``audio``).

Apart from the values so that those stay below the scene's config (``scene`` reads their
rates and formats), while a message is built for a config.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ortf_ros.io.wav import file_bytes
from ortf_ros.pipeline.streams.audio_definitions import audio_data_arrays, portaudio_format
from ortf_ros.synthetic.audio import AUDIO_GSTREAMER_NAMES, SAMPLE_BITS, audio_samples
from ortf_ros.synthetic.lidar import (
    CLOUD_FIELDS,
    CLOUD_HEIGHT,
    CLOUD_POINT_STEP,
    CLOUD_ROW_PADDING,
    CLOUD_WIDTH,
    SCAN_ANGLE_INCREMENT,
    SCAN_ANGLE_MIN,
    SCAN_RANGE,
    SCAN_RATE_HZ,
    SCAN_SAMPLES,
    cloud_data,
    scan_intensities,
    scan_ranges,
)
from ortf_ros.synthetic.message_factory import MessageFactory
from ortf_ros.synthetic.tf import LIDAR_FRAME


def laser_scan(factory: MessageFactory, seq: int, stamp: int) -> Any:
    """Scan ``seq`` as a ``sensor_msgs/LaserScan``."""
    return factory.new(
        "sensor_msgs/msg/LaserScan",
        header=factory.header(stamp, LIDAR_FRAME, seq),
        angle_min=SCAN_ANGLE_MIN,
        angle_max=SCAN_ANGLE_MIN + (SCAN_SAMPLES - 1) * SCAN_ANGLE_INCREMENT,
        angle_increment=SCAN_ANGLE_INCREMENT,
        time_increment=1.0 / SCAN_RATE_HZ / SCAN_SAMPLES,
        scan_time=1.0 / SCAN_RATE_HZ,
        range_min=SCAN_RANGE[0],
        range_max=SCAN_RANGE[1],
        ranges=scan_ranges(seq),
        intensities=scan_intensities(seq),
    )


def point_cloud(factory: MessageFactory, seq: int, stamp: int) -> Any:
    """Cloud ``seq`` as a ``sensor_msgs/PointCloud2`` (``cloud_data``)."""
    fields = [
        factory.new("sensor_msgs/msg/PointField", name=name, offset=offset, datatype=datatype, count=count)
        for name, offset, datatype, count in CLOUD_FIELDS
    ]
    return factory.new(
        "sensor_msgs/msg/PointCloud2",
        header=factory.header(stamp, LIDAR_FRAME, seq),
        height=CLOUD_HEIGHT,
        width=CLOUD_WIDTH,
        fields=fields,
        is_bigendian=False,
        point_step=CLOUD_POINT_STEP,
        row_step=CLOUD_WIDTH * CLOUD_POINT_STEP + CLOUD_ROW_PADDING,
        data=np.frombuffer(cloud_data(seq), np.uint8),
        is_dense=False,
    )


def audio_message(factory: MessageFactory, seq: int, stamp: int) -> Any:
    """Audio message ``seq``: ``audio_samples``, as AudioStamped or as AudioData bytes."""
    config = factory.config
    samples = audio_samples(config, seq)
    if config.audio == "older":
        packed = file_bytes(samples, "s24le") if config.audio_format == "s24le" else samples.tobytes()  # (3 bytes)
        return factory.new("audio_common_msgs/msg/AudioData", data=np.frombuffer(packed, np.uint8))
    code, field = portaudio_format(config.audio_format)
    arrays = audio_data_arrays(samples, field)
    info = factory.new(
        "audio_common_msgs/msg/AudioInfo",
        format=code,
        channels=config.audio_channels,
        rate=config.audio_rate_hz,
        chunk=config.audio_chunk,
    )
    data = factory.new("audio_common_msgs/msg/AudioData", **arrays)
    audio = factory.new("audio_common_msgs/msg/Audio", audio_data=data, info=info)
    header = factory.header(stamp, "microphone", seq)
    return factory.new("audio_common_msgs/msg/AudioStamped", header=header, audio=audio)


def audio_info_message(factory: MessageFactory, seq: int, stamp: int) -> Any:
    """The older layout's AudioInfo (published once, latched)."""
    config = factory.config
    return factory.new(
        "audio_common_msgs/msg/AudioInfo",
        channels=config.audio_channels,
        sample_rate=config.audio_rate_hz,
        sample_format=AUDIO_GSTREAMER_NAMES[config.audio_format],
        bitrate=config.audio_rate_hz * config.audio_channels * SAMPLE_BITS[config.audio_format],
        coding_format="wave",
    )
