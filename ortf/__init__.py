"""The ORTF v0.2 spec's own Python API: ``from ortf import load_dataset``.

The spec's examples import ``ortf`` (``from ortf import load_dataset``, ``from
ortf.convert import to_lerobot, to_rlds``), so this package exists for them to work
as written. It is a face over ``ortf_ros``, not a second implementation: every name
here is the ``ortf_ros`` object itself, so there is one reader, one validator and one
set of exports, and what the API does is exactly what the ``ortf`` command does.

Failures a caller can anticipate (a path that is not a dataset, a file that breaks the
format, an export target that is not new) raise ``OrtfError`` subclasses whose message
is one line naming the file or argument and what was expected.
"""

from __future__ import annotations

import os

from ortf_ros.dataset.reader import Dataset, Episode, load_dataset
from ortf_ros.dataset.validation import Finding, Report
from ortf_ros.dataset.validation import validate as _validate_root
from ortf_ros.errors import OrtfError

__all__ = ["Dataset", "Episode", "Finding", "OrtfError", "Report", "load_dataset", "validate"]


def validate(dataset: Dataset | str | os.PathLike[str], *, strict: bool = False, episode: str | None = None) -> Report:
    """The reference validator, programmatically (the spec: "validated programmatically
    using the reference validator"); ``ortf validate`` is the same check on the command
    line. Takes a path or a dataset ``load_dataset`` opened, and never raises on an
    invalid dataset: ``report.ok`` says whether it passed, ``report.failures`` why not.
    ``strict`` makes warnings fail; ``episode`` checks the manifest and that episode only.
    """
    root = dataset.root if isinstance(dataset, Dataset) else dataset
    return _validate_root(root, strict=strict, episode=episode)
