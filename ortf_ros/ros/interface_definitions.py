"""Definitions of the installed message types the decoder's Jazzy typestore lacks.

A live recorder decodes the bytes it receives with rosbags (``pipeline.decode``), whose
ROS 2 Jazzy store has no ``audio_common_msgs``; a bag brings its definitions along, a live
graph does not. The interface package installed here (``ros/audio_common_msgs`` built into
the venv, or a ROS install's) is what the publishers' types were generated from too, so its
``.msg`` files, found through the ament index, describe the bytes.
"""

from __future__ import annotations

from pathlib import Path

from ortf_ros.pipeline.config import ConversionConfig

AUDIO_PACKAGE = "audio_common_msgs"


def installed_definitions(package: str) -> dict[str, str]:
    """``pkg/msg/Type`` -> ``.msg`` text of an installed interface package; {} when it is not installed."""
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        share = Path(get_package_share_directory(package))
    except (PackageNotFoundError, KeyError, ValueError):
        return {}
    return {f"{package}/msg/{path.stem}": path.read_text() for path in sorted((share / "msg").glob("*.msg"))}


def mapped_definitions(config: ConversionConfig) -> dict[str, str]:
    """The definitions the mapping's topics need beyond the Jazzy store: audio's, with microphones."""
    return installed_definitions(AUDIO_PACKAGE) if config.audio else {}
