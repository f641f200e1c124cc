"""Tests of ``ortf_ros/convert``: the exports and imports, read back by their own tools."""
