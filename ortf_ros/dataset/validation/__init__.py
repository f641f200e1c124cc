"""The ORTF v0.2 validator: every rule, each with a stable id (see ``findings.RULES``).

``check_manifest`` needs no files, so writers run it before creating a dataset;
``validate`` checks a dataset on disk and never raises on a bad one.
"""

from ortf_ros.dataset.validation.dataset import validate
from ortf_ros.dataset.validation.findings import RULES, Finding, Report, Severity
from ortf_ros.dataset.validation.manifest_rules import check_manifest

__all__ = ["RULES", "Finding", "Report", "Severity", "check_manifest", "validate"]
