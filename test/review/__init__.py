"""Tests of ``ortf_ros/review``: ``ortf review`` in a real browser."""
