"""The mapping: which recorded topic becomes which stream of an ORTF dataset (``TopicMapping``).

One schema for the bag converter (a YAML file, ``--config``) and the live recorder (ROS
parameters): nested mappings whose leaves are scalars or lists of scalars, so every
value has a dotted parameter name (``cameras.wrist_camera.topic``). Cameras and wrenches
are mappings keyed by their name for that reason; a YAML file may also list them
(``cameras: [{name: wrist_camera, topic: ...}]``), which reads the same.

- ``model``: the dataclasses, one per kind of stream, and ``TopicMapping`` over them;
- ``parse``: a file, parsed YAML or ROS parameters read into one, every mistake one line
  naming the file and the dotted key;
- ``dump``: written back, every key (``--write-config``), to read back equal;
- ``detect``: guessed from a recording's topics, so that a conventional teleop bag
  converts with no file at all;
- ``tolerance``: the sync tolerance the mapping and the streams' rates give;
- ``describe``: what a mapping will do, in words (``ortf-bag2ortf --list``).
"""

from __future__ import annotations

from ortf_ros.pipeline.mapping.describe import describe_mapping
from ortf_ros.pipeline.mapping.detect import (
    AUDIO_TYPES,
    audio_name,
    camera_name,
    detect_mapping,
    is_command_topic,
    range_sensor_name,
    wrench_name,
)
from ortf_ros.pipeline.mapping.dump import MAPPING_HEADER, dump_mapping, mapping_to_dict, write_mapping
from ortf_ros.pipeline.mapping.model import (
    ActionMapping,
    AudioMapping,
    CameraMapping,
    ClockOffset,
    DetectionsMapping,
    EpisodeLabels,
    EpisodeSplit,
    JointStateMapping,
    LaserScanMapping,
    PointCloudMapping,
    StepClock,
    TimedStream,
    TimeSource,
    TopicMapping,
    WrenchMapping,
)
from ortf_ros.pipeline.mapping.parse import (
    MAPPING_KEYS,
    load_mapping,
    mapping_from_dict,
    mapping_from_parameters,
    with_writer,
)
from ortf_ros.pipeline.mapping.tolerance import SyncTolerance, sync_tolerance

__all__ = [
    "AUDIO_TYPES",
    "MAPPING_HEADER",
    "MAPPING_KEYS",
    "ActionMapping",
    "AudioMapping",
    "CameraMapping",
    "ClockOffset",
    "DetectionsMapping",
    "EpisodeLabels",
    "EpisodeSplit",
    "JointStateMapping",
    "LaserScanMapping",
    "PointCloudMapping",
    "StepClock",
    "SyncTolerance",
    "TimeSource",
    "TimedStream",
    "TopicMapping",
    "WrenchMapping",
    "audio_name",
    "camera_name",
    "describe_mapping",
    "detect_mapping",
    "dump_mapping",
    "is_command_topic",
    "load_mapping",
    "mapping_from_dict",
    "mapping_from_parameters",
    "mapping_to_dict",
    "range_sensor_name",
    "sync_tolerance",
    "with_writer",
    "wrench_name",
    "write_mapping",
]
