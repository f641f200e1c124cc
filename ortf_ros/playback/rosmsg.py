"""ROS 2 messages as rosbags objects, built and serialized to CDR without ROS.

The typestore is the one ``ortf-bag2ortf`` decodes with (``pipeline.decode.ros2_typestore``),
so what the player writes is what the converter reads. Messages are built with their
stamps on the playback timeline; ``restamp`` shifts every header stamp of a message just
before it is serialized, which is how the node keeps stamps near "now" across pauses.

Conventions are ROS's: quaternions (x, y, z, w), images ``rgb8`` and ``16UC1``
little-endian, CompressedImage ``format`` as image_transport writes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ortf_ros.format.units import NS
from ortf_ros.pipeline.decode import ros2_typestore
from ortf_ros.pipeline.streams.audio_definitions import register as register_audio

Floats = Sequence[float] | np.ndarray
JPEG_FORMAT = "rgb8; jpeg compressed bgr8"


class RosMessages:
    """Factories for the message types the player publishes, over one typestore."""

    def __init__(self) -> None:
        self.store = ros2_typestore()
        register_audio(self.store, "ros2")  # (AudioStamped, which Jazzy's store lacks)
        self._types = self.store.types

    def new(self, msgtype: str, **fields: Any) -> Any:
        return self._types[msgtype](**fields)

    # -- building blocks

    def time(self, ns: int) -> Any:
        sec, nanosec = divmod(ns, NS)
        return self.new("builtin_interfaces/msg/Time", sec=sec, nanosec=nanosec)

    def header(self, ns: int, frame_id: str) -> Any:
        return self.new("std_msgs/msg/Header", stamp=self.time(ns), frame_id=frame_id)

    def vector3(self, xyz: Floats) -> Any:
        return self.new("geometry_msgs/msg/Vector3", x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))

    def quaternion(self, xyzw: Floats) -> Any:
        x, y, z, w = (float(v) for v in xyzw)
        return self.new("geometry_msgs/msg/Quaternion", x=x, y=y, z=z, w=w)

    # -- messages

    def transform(self, ns: int, parent: str, child: str, translation: Floats, rotation_xyzw: Floats) -> Any:
        """A ``TransformStamped``: ``child`` in ``parent`` (p_parent = T * p_child)."""
        return self.new(
            "geometry_msgs/msg/TransformStamped",
            header=self.header(ns, parent),
            child_frame_id=child,
            transform=self.new(
                "geometry_msgs/msg/Transform",
                translation=self.vector3(translation),
                rotation=self.quaternion(rotation_xyzw),
            ),
        )

    def tf(self, transforms: Sequence[Any]) -> Any:
        return self.new("tf2_msgs/msg/TFMessage", transforms=list(transforms))

    def joint_state(
        self, ns: int, names: Sequence[str], position: np.ndarray, velocity: np.ndarray, effort: np.ndarray
    ) -> Any:
        return self.new(
            "sensor_msgs/msg/JointState",
            header=self.header(ns, ""),
            name=list(names),
            position=np.asarray(position, dtype=np.float64),
            velocity=np.asarray(velocity, dtype=np.float64),
            effort=np.asarray(effort, dtype=np.float64),
        )

    def wrench(self, ns: int, frame_id: str, force: Floats, torque: Floats) -> Any:
        return self.new(
            "geometry_msgs/msg/WrenchStamped",
            header=self.header(ns, frame_id),
            wrench=self.new("geometry_msgs/msg/Wrench", force=self.vector3(force), torque=self.vector3(torque)),
        )

    def image(self, ns: int, frame_id: str, pixels: np.ndarray) -> Any:
        """``rgb8`` for HxWx3 uint8, ``16UC1`` (little-endian) for HxW uint16 depth."""
        height, width = pixels.shape[:2]
        if pixels.dtype == np.uint16:
            encoding, data = "16UC1", np.ascontiguousarray(pixels, dtype="<u2").reshape(-1).view(np.uint8)
        else:
            encoding, data = "rgb8", np.ascontiguousarray(pixels, dtype=np.uint8).reshape(-1)
        return self.new(
            "sensor_msgs/msg/Image",
            header=self.header(ns, frame_id),
            height=height,
            width=width,
            encoding=encoding,
            is_bigendian=0,
            step=data.size // height,
            data=data,
        )

    def compressed_image(self, ns: int, frame_id: str, jpeg: bytes) -> Any:
        return self.new(
            "sensor_msgs/msg/CompressedImage",
            header=self.header(ns, frame_id),
            format=JPEG_FORMAT,
            data=np.frombuffer(jpeg, dtype=np.uint8),
        )

    def camera_info(
        self, ns: int, frame_id: str, width: int, height: int, intrinsics: Mapping[str, float], distortion: Any
    ) -> Any:
        """Pinhole calibration from ORTF ``intrinsics`` (fx, fy, cx, cy) and ``distortion``
        (``model``, ``coefficients``); no distortion given: an empty model and D."""
        fx, fy, cx, cy = (float(intrinsics[key]) for key in ("fx", "fy", "cx", "cy"))
        model = str(distortion.get("model", "")) if isinstance(distortion, Mapping) else ""
        coefficients = distortion.get("coefficients", []) if isinstance(distortion, Mapping) else []
        return self.new(
            "sensor_msgs/msg/CameraInfo",
            header=self.header(ns, frame_id),
            height=height,
            width=width,
            distortion_model=model,
            d=np.array(coefficients, dtype=np.float64),
            k=np.array([fx, 0, cx, 0, fy, cy, 0, 0, 1], dtype=np.float64),
            r=np.eye(3).reshape(-1),
            p=np.array([fx, 0, cx, 0, 0, fy, cy, 0, 0, 0, 1, 0], dtype=np.float64),
            binning_x=0,
            binning_y=0,
            roi=self.new(
                "sensor_msgs/msg/RegionOfInterest", x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
            ),
        )

    def string(self, text: str) -> Any:
        return self.new("std_msgs/msg/String", data=text)

    def boolean(self, value: bool) -> Any:
        return self.new("std_msgs/msg/Bool", data=value)

    def multi_array(self, labels: Sequence[str], values: np.ndarray) -> Any:
        """One labelled dimension per element: ``ortf-bag2ortf`` names the elements by the labels."""
        dims = [self.new("std_msgs/msg/MultiArrayDimension", label=label, size=1, stride=1) for label in labels]
        return self.new(
            "std_msgs/msg/Float64MultiArray",
            layout=self.new("std_msgs/msg/MultiArrayLayout", dim=dims, data_offset=0),
            data=np.asarray(values, dtype=np.float64),
        )

    def twist(self, ns: int, frame_id: str, linear: Floats, angular: Floats) -> Any:
        return self.new(
            "geometry_msgs/msg/TwistStamped",
            header=self.header(ns, frame_id),
            twist=self.new("geometry_msgs/msg/Twist", linear=self.vector3(linear), angular=self.vector3(angular)),
        )

    def pose(self, ns: int, frame_id: str, position: Floats, rotation_xyzw: Floats) -> Any:
        return self.new(
            "geometry_msgs/msg/PoseStamped",
            header=self.header(ns, frame_id),
            pose=self.new(
                "geometry_msgs/msg/Pose",
                position=self.new(
                    "geometry_msgs/msg/Point", x=float(position[0]), y=float(position[1]), z=float(position[2])
                ),
                orientation=self.quaternion(rotation_xyzw),
            ),
        )

    # -- stamps and bytes

    def restamp(self, message: Any, shift_ns: int) -> None:
        """Shift every header stamp of ``message`` by ``shift_ns`` (in place)."""
        if shift_ns == 0:
            return
        headers = [t.header for t in getattr(message, "transforms", ())]
        header = getattr(message, "header", None)
        if header is not None:
            headers.append(header)
        for h in headers:
            h.stamp = self.time(h.stamp.sec * NS + h.stamp.nanosec + shift_ns)

    def serialize(self, message: Any, msgtype: str) -> bytes:
        """CDR, as rclpy's ``Publisher.publish`` takes it for a raw message and MCAP stores it."""
        return bytes(self.store.serialize_cdr(message, msgtype))
