"""Keep pandas out of a long-lived process that uses pyarrow but never pandas.

Why: pyarrow imports pandas, when it is installed, at the first ``pa.array`` it builds
(it asks whether the argument is a pandas object), whatever the argument. In
``ortf_recorder`` that import was about 35 MB of its memory (PSS; 31 MB of RSS, about
140,000 Python objects), for a module it never calls; ``bench/bench_live.py`` measures it.

How: pyarrow asks once per process. ``keep_pandas_out`` makes it ask while the import
fails (a finder on ``sys.meta_path`` for the duration of the question), so pyarrow takes
pandas as absent and its conversions do not ask again. Nothing else changes: ``import
pandas`` still works afterwards, and so does ``Table.to_pandas``, which imports it
explicitly. A process that already imported pandas is left as it is.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

import pyarrow as pa


class _RefusePandas(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pandas":
            raise ModuleNotFoundError("pandas is kept out of pyarrow's conversions here", name=fullname)
        return None


def keep_pandas_out() -> None:
    """Make pyarrow settle, once, that pandas is absent (call before its first conversion)."""
    if "pandas" in sys.modules:
        return
    refuse = _RefusePandas()
    sys.meta_path.insert(0, refuse)
    try:
        pa.array([0])  # (pyarrow's question, answered "no pandas" and remembered)
    finally:
        sys.meta_path.remove(refuse)
