"""Playback: an ORTF dataset as the ROS 2 messages it was recorded from.

The messages are built without ROS (``messages``), so ``ortf export mcap`` writes
exactly what the ``ortf_player`` node (``node``, the only module importing rclpy)
publishes.
"""
