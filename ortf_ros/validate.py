"""``ortf_ros.validate``: the validator's public names (implemented in ``ortf_ros.validation``)."""

from ortf_ros.validation import RULES, Finding, Report, Severity, check_manifest, validate

__all__ = ["RULES", "Finding", "Report", "Severity", "check_manifest", "validate"]
