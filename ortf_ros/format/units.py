"""Time units, defined once: ROS stamps and the samples of every stream are integer
nanoseconds (float seconds lose sub-microsecond precision at epoch scale), and a time in
seconds is ``ns / NS``."""

NS = 1_000_000_000
"""Nanoseconds per second."""
