"""Tests of ``ortf_ros/pipeline``: recordings to steps (decode, extract, fast path, blocks, TF, sync,
the prologue, the live recorder without ROS, joints, cameras, the robot description)."""
