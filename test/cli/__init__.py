"""Tests of ``ortf_ros/cli``, ``ortf`` and the spec's Python API: the commands as users run them."""
