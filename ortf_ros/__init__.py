"""ortf_ros: robot teleoperation to ORTF v0.2 datasets.

Everything but ``ortf_ros.ros`` is ROS-free: the dataset writer and reader, validation,
bag conversion, playback's messages and the exports run where rclpy is not installed.
``ortf_ros.ros`` holds the ROS 2 nodes and their plumbing; it alone imports rclpy and
the ROS message packages (``test/install/test_import_rules.py``).
"""

__version__ = "0.1.0"
