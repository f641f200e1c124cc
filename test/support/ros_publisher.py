"""Child process of test_ros_env: publishes /tf and an image once a subscriber is there."""

from __future__ import annotations

import sys
import time

import rclpy
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import Image
from tf2_msgs.msg import TFMessage

COUNT = 10
WIDTH, HEIGHT = 64, 48


def image_bytes(seq: int) -> bytes:
    return bytes((seq + i) % 256 for i in range(WIDTH * HEIGHT * 3))


def main() -> int:
    rclpy.init()
    node = rclpy.create_node("ortf_test_publisher")
    tf_pub = node.create_publisher(TFMessage, "/tf", 10)
    image_pub = node.create_publisher(Image, "/wrist_camera/image_raw", 10)
    deadline = time.monotonic() + 30
    while tf_pub.get_subscription_count() == 0 or image_pub.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.05)
    for seq in range(COUNT):
        transform = TransformStamped()
        transform.header.frame_id = "base_link"
        transform.child_frame_id = f"tool{seq}"
        transform.transform.translation.x = 0.1 * seq
        transform.transform.rotation.z = 0.6
        transform.transform.rotation.w = 0.8
        tf_pub.publish(TFMessage(transforms=[transform]))
        image = Image(height=HEIGHT, width=WIDTH, encoding="rgb8", step=WIDTH * 3, data=image_bytes(seq))
        image.header.frame_id = "wrist_camera_optical"
        image_pub.publish(image)
        time.sleep(1 / 30)
    time.sleep(0.5)
    node.destroy_node()  # type: ignore[no-untyped-call]
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
