"""Tests of ``ortf_ros/pipeline/sources``: reading recordings on disk, whole or cut short."""
