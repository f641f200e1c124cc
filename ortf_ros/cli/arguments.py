"""The console scripts' argument types: numbers take the ``Bound`` the same setting has in
a mapping file (``ortf_ros.bounds``), so ``--rate -5`` and ``step: {rate_hz: -5}`` get
the same words; labels are not blank, as in a mapping. Paths are checked by
``ortf_ros.io.paths``, which the recorder's parameters share.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ortf_ros.bounds import Bound


def bounded(bound: Bound) -> Callable[[str], float | int]:
    """An argparse ``type=``: the word as a number within ``bound``."""

    def parse(text: str) -> float | int:
        try:
            return bound.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def text(word: str) -> str:
    """An argparse ``type=`` for labels (task, notes): not blank, as in a mapping file."""
    if not word.strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty string, got {word!r}")
    return word
