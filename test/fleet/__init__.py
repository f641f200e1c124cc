"""Tests of ``ortf_ros/fleet``: many recordings, in place, with ``--jobs`` and on Ray."""
