"""Tests of ``ortf_ros/quality``: ``ortf doctor``."""
