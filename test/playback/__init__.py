"""Tests of ``ortf_ros/playback`` without ROS: the player's messages, schedule and MCAP export."""
