"""Tests of ``ortf_ros/synthetic``: the generated scenes every converter test compares against."""
