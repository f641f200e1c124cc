"""Tests of ``ortf_ros/ros``: the nodes and the scene publisher over real DDS on loopback."""
