"""ortf_ros: robot teleoperation to ORTF v0.2 datasets.

The top level is ROS-free; only ``ortf_ros.ros`` imports rclpy.
"""

__version__ = "0.1.0"
