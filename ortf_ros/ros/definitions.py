"""Message definitions of installed packages, for the types the decoder's ROS 2 Jazzy
typestore lacks (``vision_msgs``, a lab's own messages): what ``ros2 bag record`` writes into a
recording, made the same way from the ``.msg`` files a package installs under its share
directory, so that a live recorder decodes what a conversion of the same topics decodes
(``pipeline.decode.Decoder.register``).

The text is rosbag2's ``ros2msg`` form: the type's ``.msg``, then each type it uses, directly or
not, as ``MSG: pkg/Type`` sections after a line of ``=``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

PRIMITIVES = frozenset(f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)) | {
    "bool", "byte", "char", "float32", "float64", "string", "wstring"
}  # fmt: skip
SEPARATOR = "=" * 80
_FIELD = re.compile(r"^\s*([A-Za-z][\w/]*)(?:\[[^\]]*\])?(?:<=\d+)?\s+\w+")


def installed_definition(msgtype: str) -> str | None:
    """``pkg/msg/Type``'s definition with those of the types it uses; None when a package or
    ``.msg`` file is not installed (the caller goes on without: its messages are then reported
    undecodable)."""
    package, _, name = msgtype.split("/")
    sections: list[str] = []
    seen: set[str] = set()
    pending = [(package, name)]
    while pending:
        package, name = pending.pop(0)
        key = f"{package}/{name}"
        if key in seen:
            continue
        seen.add(key)
        text = _msg_text(package, name)
        if text is None:
            return None
        sections.append(text if not sections else f"{SEPARATOR}\nMSG: {key}\n{text}")
        pending += _used_types(text, package)
    return "\n".join(sections)


def _msg_text(package: str, name: str) -> str | None:
    try:
        share = Path(get_package_share_directory(package))
    except (PackageNotFoundError, ValueError):
        return None
    try:
        return (share / "msg" / f"{name}.msg").read_text(encoding="utf-8").rstrip("\n") + "\n"
    except OSError:
        return None


def _used_types(text: str, package: str) -> list[tuple[str, str]]:
    """The message types the fields of a ``.msg`` name (a bare ``Type`` is of ``package``;
    ``Header`` is ``std_msgs``'s); constants and comments are skipped."""
    used = []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        match = _FIELD.match(line)
        if match is None or "=" in line.split(None, 2)[-1]:
            continue
        kind = match.group(1)
        if kind in PRIMITIVES:
            continue
        if "/" in kind:
            owner, _, type_name = kind.partition("/")
            used.append((owner, type_name.rsplit("/", 1)[-1]))
        else:
            used.append(("std_msgs", "Header") if kind == "Header" else (package, kind))
    return used
