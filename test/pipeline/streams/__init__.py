"""Tests of ``ortf_ros/pipeline/streams``, offline: audio, laser scans and point clouds, H.264 cameras."""
