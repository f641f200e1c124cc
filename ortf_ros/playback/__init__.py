"""Playback: an ORTF dataset as the ROS 2 messages it was recorded from.

The messages are built without ROS (``messages``), so ``ortf export mcap`` writes
exactly what the ``ortf_player`` node (``ortf_ros.ros.player_node``) publishes.
Nothing here imports rclpy.
"""
