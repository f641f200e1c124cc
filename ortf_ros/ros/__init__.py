"""The ROS 2 side of ortf_ros: the nodes and the plumbing they share.

This is the only package that imports rclpy and the ROS message packages
(``test/install/test_import_rules.py`` holds everything else to that). The core around it,
dataset writer, reader, validation, bag conversion, playback messages and exports, is
ROS-free, so ``pip install ortf_ros`` works on a machine without ROS 2. ``entry`` is
ROS-free too: the console scripts start there and say in one line when ROS is missing.
"""
