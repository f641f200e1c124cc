"""Conversions between ORTF and the formats trainers read (the spec's ``ortf_ros.convert``).

Each target lives in a module of its own and is imported only when used, so the core
never pays for a heavy optional dependency (TensorFlow for RLDS).
"""
