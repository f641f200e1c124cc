"""Conversions between ORTF and the formats trainers read (the spec's ``ortf_ros.convert``).

Each target lives in a module of its own and is imported only when used, so the core
never pays for a heavy optional dependency (TensorFlow for RLDS).
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it, imported on first use.
_API = {
    "export_rerun": "ortf_ros.convert.rerun_export",
    "from_lerobot": "ortf_ros.convert.lerobot_import",
    "from_rlds": "ortf_ros.convert.rlds_import",
    "to_lerobot": "ortf_ros.convert.lerobot_export",
    "to_mixtrain": "ortf_ros.convert.mixtrain_export",
    "to_rlds": "ortf_ros.convert.rlds_export",
}


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
