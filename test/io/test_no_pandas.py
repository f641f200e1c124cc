"""``no_pandas.keep_pandas_out``: pyarrow's conversions stop importing pandas, and nothing
that asks for pandas by name is refused. Each case is a fresh interpreter: whether
pandas is imported is the state of a whole process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("pandas")  # (without pandas installed there is nothing to keep out)

CONVERSIONS = """
import sys
import numpy as np
import pyarrow as pa
{before}
pa.array(np.arange(3))
pa.table({{"a": [1.0, 2.0], "b": ["x", "y"]}})
print("pandas" in sys.modules)
"""


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_pyarrow_imports_pandas_at_its_first_conversion_unless_kept_out() -> None:
    # The premise: if pyarrow stops importing pandas on its own, the helper can go.
    assert _run(CONVERSIONS.format(before="")) == ["True"]
    kept_out = "from ortf_ros.io.no_pandas import keep_pandas_out\nkeep_pandas_out()"
    assert _run(CONVERSIONS.format(before=kept_out)) == ["False"]


def test_pandas_stays_importable_and_to_pandas_still_works() -> None:
    code = CONVERSIONS.format(before="from ortf_ros.io.no_pandas import keep_pandas_out\nkeep_pandas_out()")
    code += """
frame = pa.table({"a": [1, 2]}).to_pandas()
print(type(frame).__name__, list(frame["a"]))
import pandas
print(pandas.Series([3]).sum())
"""
    assert _run(code) == ["False", "DataFrame", "[1,", "2]", "3"]


def test_a_process_that_already_imported_pandas_is_left_as_it_is() -> None:
    code = """
import sys
import pandas
from ortf_ros.io.no_pandas import keep_pandas_out
finders = list(sys.meta_path)
keep_pandas_out()
print(sys.meta_path == finders, type(__import__("pyarrow").table({"a": [1]}).to_pandas()).__name__)
"""
    assert _run(code) == ["True", "DataFrame"]
