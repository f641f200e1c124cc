"""The cameras' messages: raw, JPEG and H.264 images, depth, and camera_info.

Apart from ``messages`` because a camera's message is the most varied of the scene: one
image stream per camera in three encodings (an H.264 stream keeps encoder state between
messages and must be built in order), plus the depth camera and every camera's
calibration, in ROS 1's or ROS 2's field names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ortf_ros.io.h264 import AnnexBEncoder
from ortf_ros.io.jpeg import JpegEncoder
from ortf_ros.synthetic.images import (
    CAMERA_DISTORTION,
    H264_GOP,
    JPEG_FORMAT,
    camera_intrinsics,
    depth_frame,
    rgb_frame,
)
from ortf_ros.synthetic.message_factory import Build, MessageFactory
from ortf_ros.synthetic.tf import DEPTH_FRAME, OVERHEAD_CAMERA_FRAME, SIDE_CAMERA_FRAME, WRIST_CAMERA_FRAME
from ortf_ros.synthetic.topics import (
    CAMERA_FRAMES,
    TOPIC_DEPTH_CAMERA_INFO,
    TOPIC_DEPTH_IMAGE,
    TOPIC_OVERHEAD_CAMERA_INFO,
    TOPIC_SIDE_CAMERA_INFO,
    TOPIC_WRIST_CAMERA_INFO,
)
from ortf_ros.synthetic.typestore import COMPRESSED_VIDEO_TYPE


class CameraMessages:
    """Builds every camera topic's messages (``builders``) with ``factory``."""

    def __init__(self, factory: MessageFactory) -> None:
        self.factory = factory
        config = factory.config
        any_jpeg = any(config.is_compressed(camera) for camera in config.cameras())
        self.jpeg = JpegEncoder(config.width, config.height) if any_jpeg else None

    def builders(self) -> dict[str, tuple[str, Build]]:
        """Topic -> (message type, builder) of each camera's image and camera_info, and depth's."""
        config = self.factory.config
        builders: dict[str, tuple[str, Build]] = {
            TOPIC_WRIST_CAMERA_INFO: ("sensor_msgs/msg/CameraInfo", self._camera_info_builder(WRIST_CAMERA_FRAME)),
            TOPIC_OVERHEAD_CAMERA_INFO: (
                "sensor_msgs/msg/CameraInfo",
                self._camera_info_builder(OVERHEAD_CAMERA_FRAME),
            ),
            TOPIC_SIDE_CAMERA_INFO: ("sensor_msgs/msg/CameraInfo", self._camera_info_builder(SIDE_CAMERA_FRAME)),
            TOPIC_DEPTH_CAMERA_INFO: ("sensor_msgs/msg/CameraInfo", self._camera_info_builder(DEPTH_FRAME)),
            TOPIC_DEPTH_IMAGE: ("sensor_msgs/msg/Image", self.depth),
        }
        for camera in CAMERA_FRAMES:
            compressed = config.is_compressed(camera)
            build = self._h264_builder(camera) if camera in config.h264_cameras else None
            build = build or self._image_builder(camera, compressed)
            builders[config.image_topic(camera)] = (config.image_type(camera), build)
        return builders

    def _image_builder(self, camera: str, compressed: bool) -> Build:
        frame_id = CAMERA_FRAMES[camera]
        factory = self.factory

        def build(seq: int, stamp: int) -> Any:
            rgb = rgb_frame(camera, seq, factory.config.width, factory.config.height)
            if compressed:
                assert self.jpeg is not None
                data = np.frombuffer(self.jpeg.encode(rgb), dtype=np.uint8)
                return factory.new(
                    "sensor_msgs/msg/CompressedImage",
                    header=factory.header(stamp, frame_id, seq),
                    format=JPEG_FORMAT,
                    data=data,
                )
            return self.image(stamp, frame_id, seq, rgb, "rgb8")

        return build

    def _h264_builder(self, camera: str) -> Build:
        """Camera ``camera``'s frames through an ``AnnexBEncoder``, one per message in
        order from message 0 (built again, it starts the stream anew); with ``h264_lead``
        the encoder has had frames before the recording's first."""
        factory = self.factory
        config = factory.config
        frame_id = CAMERA_FRAMES[camera]
        topic = config.image_topic(camera)
        encoders: list[AnnexBEncoder] = []  # the current one; a new one whenever message 0 is built (again)
        built = [0]  # the messages it has made

        def packet(seq: int) -> bytes:
            if config.h264_bframes:
                return reordered(seq)
            if seq == 0:
                encoders[:] = [AnnexBEncoder(config.width, config.height, H264_GOP)]
                for _ in range(H264_GOP - config.h264_lead if config.h264_lead else 0):
                    encoders[0].encode(rgb_frame(camera, 0, config.width, config.height))
                built[0] = 0
            if seq != built[0]:
                raise ValueError(f"{camera}: H.264 message {seq} built after message {built[0] - 1}: in order only")
            built[0] += 1
            return encoders[0].encode(rgb_frame(camera, seq, config.width, config.height))

        stream: list[bytes] = []

        def reordered(seq: int) -> bytes:
            """A stream with B-frames, in decode order: encoded whole at its first message."""
            if not stream:
                frames = [rgb_frame(camera, n, config.width, config.height) for n in range(config.count(topic))]
                stream.extend(AnnexBEncoder(config.width, config.height, H264_GOP, bframes=2).encode_all(frames))
            return stream[seq]

        def build(seq: int, stamp: int) -> Any:
            data = np.frombuffer(packet(seq), np.uint8)
            if config.h264_message == "CompressedImage":
                header = factory.header(stamp, frame_id, seq)
                return factory.new("sensor_msgs/msg/CompressedImage", header=header, format="h264", data=data)
            timestamp = factory.header(stamp, frame_id).stamp
            return factory.new(COMPRESSED_VIDEO_TYPE, timestamp=timestamp, frame_id=frame_id, data=data, format="h264")

        return build

    def image(self, stamp: int, frame_id: str, seq: int, pixels: np.ndarray, encoding: str) -> Any:
        height, width = pixels.shape[:2]
        return self.factory.new(
            "sensor_msgs/msg/Image",
            header=self.factory.header(stamp, frame_id, seq),
            height=height,
            width=width,
            encoding=encoding,
            is_bigendian=0,
            step=pixels.strides[0],
            data=np.ascontiguousarray(pixels).reshape(-1).view(np.uint8),
        )

    def depth(self, seq: int, stamp: int) -> Any:
        config = self.factory.config
        pixels = depth_frame(seq, config.width, config.height).astype("<u2")
        return self.image(stamp, DEPTH_FRAME, seq, pixels, "16UC1")

    def _camera_info_builder(self, frame_id: str) -> Build:
        return lambda seq, stamp: self.camera_info(seq, stamp, frame_id)

    def camera_info(self, seq: int, stamp: int, frame_id: str) -> Any:
        new, config = self.factory.new, self.factory.config
        fx, fy, cx, cy = camera_intrinsics(config.width, config.height)
        k = np.array([fx, 0, cx, 0, fy, cy, 0, 0, 1], dtype=np.float64)
        r = np.eye(3).reshape(-1)
        p = np.array([fx, 0, cx, 0, 0, fy, cy, 0, 0, 0, 1, 0], dtype=np.float64)
        d = np.array(CAMERA_DISTORTION[1], dtype=np.float64)
        roi = new("sensor_msgs/msg/RegionOfInterest", x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
        common = {
            "header": self.factory.header(stamp, frame_id, seq),
            "height": config.height,
            "width": config.width,
            "distortion_model": CAMERA_DISTORTION[0],
            "binning_x": 0,
            "binning_y": 0,
            "roi": roi,
        }
        if self.factory.ros1:
            return new("sensor_msgs/msg/CameraInfo", **common, D=d, K=k, R=r, P=p)
        return new("sensor_msgs/msg/CameraInfo", **common, d=d, k=k, r=r, p=p)
