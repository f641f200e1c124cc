"""What ``ortf demo`` shows, shared by its offline part (``demo_command``) and its live
part (``ortf_ros.ros.live_demo``): the mapping both use, a dataset validated and shown, and
the line that skips the live part where ROS 2 is not installed (``pip install ortf_ros``
alone).

In ``cli/`` rather than ``synthetic/``: these are the demo command's steps (a mapping
detected, ``ortf validate``, ``ortf doctor``, ``ortf info``), not synthetic data; the
synthetic scene stays free of the dataset checks it is used to test."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from ortf_ros.dataset.info import dataset_info
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import GET_ROS_2
from ortf_ros.format.accounting import accounted
from ortf_ros.pipeline.mapping import TopicMapping, detect_mapping
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.quality.doctor import examine


def live_skipped() -> str | None:
    """The line that says the live part is skipped, when rclpy is not installed at all
    (None: it is, and the live part checks the rest of ROS 2 itself). Looked up, not
    imported: this process stays free of ROS."""
    try:
        if importlib.util.find_spec("rclpy") is not None:
            return None
    except (ImportError, ValueError):  # (a finder that refuses it, a broken module entry)
        pass
    return f"live recording skipped: it needs ROS 2 (rclpy is not importable): {GET_ROS_2}"


def demo_mapping(bag: Path) -> TopicMapping:
    """The mapping ``ortf-bag2ortf`` detects for a bag of the demo scene. Its sync
    tolerance is left to be derived from the streams (the 50 Hz command, sampled
    ``latest``, sets 25 ms), by the converter and the live recorder alike."""
    with BagSource(bag) as source:
        return detect_mapping(source.topics())


def show_validated(root: Path, say: Callable[[str], None]) -> bool:
    """``ortf validate --strict``, each episode's accounting, ``ortf doctor`` and ``ortf info``
    of ``root``, as the demo prints them; whether valid."""
    report = validate(root, strict=True)
    say("")
    for finding in report.findings:
        say(finding.line())
    say(f"ortf validate --strict {root}: {report.summary()}")
    dataset = load_dataset(root)
    for record in dataset.episodes:
        say(f"  episode {record.episode_id}: {accounted(record.accounting or ())}")
    findings = list(examine(dataset))
    for item in findings:
        say(item.line())
    say(f"ortf doctor {root}: {len(findings)} finding(s)\n")
    say("\n".join(dataset_info(dataset).lines()))
    return report.ok
