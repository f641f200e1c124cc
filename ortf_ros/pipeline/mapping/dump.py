"""Writing a mapping back (``ortf-bag2ortf --write-config``): every key of the schema, ``null``
where unset, so the file shows what can be set, under a header that says what each key
does. What is written reads back (``parse.load_mapping``) to an equal mapping; a mapping
that would not is refused before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ortf_ros.errors import MappingError
from ortf_ros.io import atomic
from ortf_ros.pipeline.mapping.model import TopicMapping
from ortf_ros.pipeline.mapping.parse import mapping_from_dict


def mapping_to_dict(mapping: TopicMapping) -> dict[str, Any]:
    """Every key of the schema (``null`` where unset): ``mapping_from_dict`` reads it back
    to an equal mapping."""
    return {
        "step": {"rate_hz": mapping.step.rate_hz, "camera": mapping.step.camera},
        "sync_tolerance_ms": mapping.sync_tolerance_ms,
        "drop_outside_tolerance": mapping.drop_outside_tolerance,
        "max_latency_ms": mapping.max_latency_ms,
        "cameras": {
            c.name: {
                "topic": c.topic,
                "kind": c.kind,
                "camera_info_topic": c.camera_info_topic,
                "camera_info_url": c.camera_info_url,
                "time": c.time,
                "clock_offset_ms": c.clock_offset_ms,
                "policy": c.policy,
                "sync_tolerance_ms": c.sync_tolerance_ms,
            }
            for c in mapping.cameras
        },
        "joint_states": None
        if mapping.joint_states is None
        else {
            "topic": mapping.joint_states.topic,
            "time": mapping.joint_states.time,
            "clock_offset_ms": mapping.joint_states.clock_offset_ms,
            "policy": mapping.joint_states.policy,
            "native": mapping.joint_states.native,
            "sync_tolerance_ms": mapping.joint_states.sync_tolerance_ms,
        },
        "wrenches": {
            w.name: {
                "topic": w.topic,
                "frame": w.frame,
                "time": w.time,
                "clock_offset_ms": w.clock_offset_ms,
                "policy": w.policy,
                "native": w.native,
                "range_force": w.range_force,
                "range_torque": w.range_torque,
                "sync_tolerance_ms": w.sync_tolerance_ms,
            }
            for w in mapping.wrenches
        },
        "audio": {
            a.name: {
                "topic": a.topic,
                "info_topic": a.info_topic,
                "time": a.time,
                "clock_offset_ms": a.clock_offset_ms,
                "codec": a.codec,
            }
            for a in mapping.audio
        },
        "action": {
            "topic": mapping.action.topic,
            "time": mapping.action.time,
            "clock_offset_ms": mapping.action.clock_offset_ms,
            "policy": mapping.action.policy,
            "sync_tolerance_ms": mapping.action.sync_tolerance_ms,
        },
        "detections": None
        if mapping.detections is None
        else {
            "topic": mapping.detections.topic,
            "camera": mapping.detections.camera,
            "labels": dict(mapping.detections.labels),
            "time": mapping.detections.time,
            "clock_offset_ms": mapping.detections.clock_offset_ms,
        },
        "tf_topics": list(mapping.tf_topics),
        "tf_static_topics": list(mapping.tf_static_topics),
        "robot_description_topic": mapping.robot_description_topic,
        "base_frame": mapping.base_frame,
        "end_effector_frame": mapping.end_effector_frame,
        "world_frame": mapping.world_frame,
        "gripper_joints": list(mapping.gripper_joints),
        "episodes": {
            "mode": mapping.episodes.mode,
            "topic": mapping.episodes.topic,
            "gap_s": mapping.episodes.gap_s,
            "ranges": [list(r) for r in mapping.episodes.ranges],
        },
        "labels": {
            "task": mapping.labels.task,
            "task_topic": mapping.labels.task_topic,
            "success": mapping.labels.success,
            "failure_reason": mapping.labels.failure_reason,
            "operator_notes": mapping.labels.operator_notes,
        },
        "writer": mapping.writer_settings(),
        "laser_scans": {
            s.name: {
                "topic": s.topic,
                "time": s.time,
                "clock_offset_ms": s.clock_offset_ms,
                "policy": s.policy,
                "native": s.native,
                "sync_tolerance_ms": s.sync_tolerance_ms,
            }
            for s in mapping.laser_scans
        },
        "point_clouds": {
            p.name: {"topic": p.topic, "time": p.time, "clock_offset_ms": p.clock_offset_ms}
            for p in mapping.point_clouds
        },
    }


MAPPING_HEADER = """\
# ortf-bag2ortf topic mapping: which recorded topic becomes which part of an ORTF dataset.
#   ortf-bag2ortf BAG... -o DATASET --config THIS_FILE
# The live recorder takes the same keys as ROS parameters (cameras.wrist_camera.topic).
# Keys left out take their defaults; null means "unset" / "derive it".
#
# step                 steps at a fixed control rate (rate_hz) or at each frame of one
#                      camera (camera: its name); set exactly one of the two
# sync_tolerance_ms    how far from its step a sample may be, for every stream that does not
#                      give its own (null: as far as each stream's rate and policy allow, at
#                      least half the step period); steps beyond it are counted, or dropped
#                      with drop_outside_tolerance. The dataset declares the loosest stream's;
#                      the summary says which stream set it, and each one's where tighter
# max_latency_ms       how long after its stamp a message may be recorded (default 200):
#                      steps wait this long in recording time for the samples around them;
#                      messages later than that are counted as late, per topic
# cameras              name -> sensor_msgs/Image or CompressedImage topic; kind rgb or depth
#                      (16-bit, stored losslessly); the intrinsics come from camera_info_topic,
#                      else from camera_info_url (a camera_calibration YAML: file:///abs.yaml,
#                      package://pkg/calib.yaml or a path relative to this file), else unknown
#                      (H.264: foxglove_msgs CompressedVideo, CompressedImage h264: stored as published)
# joint_states         the robot's state: a sensor_msgs/JointState topic, or a ros_control
#                      control_msgs/JointTrajectoryControllerState one (its feedback/actual)
# wrenches             name -> geometry_msgs/WrenchStamped topic (force-torque sensors);
#                      frame null: the messages' header frame; range_force (N) and
#                      range_torque (N m): the sensor's rated ranges (null: "unknown")
# audio                name -> audio_common_msgs topic (microphones): AudioStamped (ROS 2
#                      layout), or AudioData / AudioDataStamped described by the AudioInfo
#                      messages on info_topic (null: the sibling audio_info or info topic);
#                      codec wav (default: the PCM as received), flac or aac; every sample is
#                      kept, a file per episode, with a table of the chunks' times
# laser_scans          name -> sensor_msgs/LaserScan topic (a 2D lidar): every scan kept at its
#                      native rate (ranges, intensities), steps point at one (latest/nearest)
# point_clouds         name -> sensor_msgs/PointCloud2 topic: every cloud kept, a row each, in
#                      the episode's point_clouds/<name>/chunk-NNN/episode_NNNNNN.parquet
# action               the command topic (JointState, JointTrajectory, Float64MultiArray,
#                      Twist(Stamped), PoseStamped, Float64/Bool), or a controller state
#                      (its reference/desired); topic null: the next step's joint
#                      positions; the manifest says which
# detections           a vision_msgs/Detection2DArray topic (topic) of boxes in a camera's
#                      frames (camera: its name); those nearest the episode's first frame
#                      become annotations/episode_N/scene_objects.json and first_frame.jpg;
#                      labels: class id -> name stored as the object's class
# time                 header: the message's header stamp; receive: when it was recorded
#                      (use receive for messages without a header)
# clock_offset_ms      null: the stream's clock is the other streams'; auto: measured at each
#                      episode's start (receive time minus its time, against the others')
#                      and taken out; a number: milliseconds added to its times. Without it,
#                      a stream whose clock is more than max(max_latency_ms, 100) ms off the
#                      others' is refused (one driver on its own clock; receive time beside
#                      stamps of a simulation or of an unsynchronised robot)
# policy               latest (newest at or before the step), nearest, linear (numbers only)
# native               also keep every sample at its native rate in a side table
# sync_tolerance_ms    (of a camera, joint_states, a wrench, a laser scan, action) this
#                      stream's own tolerance (null: the mapping's sync_tolerance_ms above);
#                      steps are made only where every stream has a sample within its own
#                      tolerance, and each is counted and validated by its own
# tf_topics, tf_static_topics, robot_description_topic   TF and the URDF (std_msgs/String)
# base_frame, end_effector_frame, world_frame   null: from the URDF and the TF tree
# gripper_joints       [] : the URDF's movable joints named like finger or gripper
# episodes.mode        input (one episode per input), topic (boundary topic), gap (gap_s
#                      seconds without messages), ranges ([start, end] s from the bag start)
# labels               task instruction, success, failure_reason and notes of the episodes
# writer               DatasetWriter settings: chunk_size, row_group_steps,
#                      row_group_bytes, encoder_queue_frames, step_batch (here 64 unless given), video
#                      (codec, crf, preset, gop, pix_fmt), as in config/writer.yaml
"""


def dump_mapping(mapping: TopicMapping) -> str:
    """The YAML text ``write_mapping`` writes (checked to read back)."""
    data = mapping_to_dict(mapping)
    mapping_from_dict(data, "the mapping to write")  # refuse to write what would not load
    return MAPPING_HEADER + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def write_mapping(mapping: TopicMapping, path: str | Path) -> None:
    """Save ``mapping`` as YAML that ``load_mapping`` reads back to an equal mapping."""
    text = dump_mapping(mapping)
    try:
        atomic.write_text(Path(path), text)
    except OSError as exc:
        raise MappingError(f"{path}: cannot write the topic mapping ({exc.strerror or exc})") from None
