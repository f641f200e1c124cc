"""Optional extras (``pip install 'ortf_ros[NAME]'``): imported by name when a part that
needs one runs (an export, the review server, the browser that drives it), so the core
never imports them and mypy checks the package without them. A missing one is a usage
error (exit 2) whose line says the pip command."""

from __future__ import annotations

import importlib
from typing import Any

from ortf_ros.errors import UsageError


def optional_module(module: str, purpose: str, extra: str) -> Any:
    """``module`` imported; a UsageError naming ``purpose``'s needs and the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"{purpose} ({exc}); install it with: pip install 'ortf_ros[{extra}]'") from None
