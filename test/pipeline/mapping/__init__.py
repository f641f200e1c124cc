"""Tests of ``ortf_ros/pipeline/mapping``: the topic mapping."""
