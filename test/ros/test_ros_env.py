"""The ROS 2 ground later issues stand on: real rclpy over loopback DDS with the
built tf2_msgs, and a core that works where rclpy cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import rclpy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image
from tf2_msgs.msg import TFMessage

from support.child_process import BLOCK_ROS
from support.ros_publisher import COUNT, image_bytes

PUBLISHER = Path(__file__).resolve().parents[1] / "support" / "ros_publisher.py"


def test_discovery_stays_on_this_machine() -> None:
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert 0 <= int(os.environ["ROS_DOMAIN_ID"]) <= 101


def test_tf_and_images_cross_processes_as_raw_cdr() -> None:
    """Subscriptions take raw CDR bytes (what the recorder will queue) and decode them."""
    received: dict[str, list[bytes]] = {"/tf": [], "/wrist_camera/image_raw": []}
    rclpy.init()
    node = rclpy.create_node("ortf_test_subscriber")
    try:
        for topic, msg_type in (("/tf", TFMessage), ("/wrist_camera/image_raw", Image)):
            node.create_subscription(msg_type, topic, received[topic].append, 10, raw=True)
        publisher = subprocess.Popen(
            [sys.executable, str(PUBLISHER)], env=dict(os.environ), stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while min(len(v) for v in received.values()) < COUNT and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        _, stderr = publisher.communicate(timeout=60)
        assert publisher.returncode == 0, stderr
    finally:
        node.destroy_node()  # type: ignore[no-untyped-call]
        rclpy.shutdown()

    assert len(received["/tf"]) == COUNT and len(received["/wrist_camera/image_raw"]) == COUNT
    for seq, raw in enumerate(received["/tf"]):
        message = deserialize_message(raw, TFMessage)
        transform = message.transforms[0]
        assert (transform.header.frame_id, transform.child_frame_id) == ("base_link", f"tool{seq}")
        assert transform.transform.translation.x == 0.1 * seq
        assert (transform.transform.rotation.z, transform.transform.rotation.w) == (0.6, 0.8)
    for seq, raw in enumerate(received["/wrist_camera/image_raw"]):
        image = deserialize_message(raw, Image)
        assert (image.width, image.height, image.encoding) == (64, 48, "rgb8")
        assert bytes(image.data) == image_bytes(seq)


def test_core_and_cli_work_without_rclpy(tmp_path: Path) -> None:
    script = BLOCK_ROS + (
        "from ortf_ros.cli.ortf import main\n"
        f"code = main(['demo', {str(tmp_path / 'demo')!r}, '--episodes', '1', '--seconds', '0.5', "
        "'--width', '64', '--height', '48'])\n"
        "assert 'rclpy' not in sys.modules\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert "episodes  1" in result.stdout
