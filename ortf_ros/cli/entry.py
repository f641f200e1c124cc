"""The console scripts' entry points, light on purpose.

Importing a command's module takes half a second (pyarrow, PyAV, numpy): a Ctrl-C in that
time would print a traceback of the import. Here the import is made inside the same
guard as the command, so an early Ctrl-C is exit 130 (SIGTERM 143) and nothing more.
"""

from __future__ import annotations

import importlib

from ortf_ros.cli.boundary import interrupted, stop_signals


def ortf() -> int:
    """``ortf``: ``ortf_ros.cli.ortf``."""
    return _run("ortf_ros.cli.ortf")


def bag2ortf() -> int:
    """``ortf-bag2ortf``: ``ortf_ros.cli.bag2ortf``."""
    return _run("ortf_ros.cli.bag2ortf")


def _run(module_name: str) -> int:
    with stop_signals():  # (SIGTERM while importing, too, is exit 143 and no traceback)
        try:
            module = importlib.import_module(module_name)
            main: int = module.main()
        except KeyboardInterrupt as exc:
            return interrupted(exc)
    return main
