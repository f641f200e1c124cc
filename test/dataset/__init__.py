"""Tests of ``ortf_ros/dataset``: the writer and reader, commits, crashes, edits, validation."""
