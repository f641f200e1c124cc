"""Where an export writes: a new directory that appears whole or not at all.

An export is built in a scratch directory beside its target and renamed onto it when
complete, so a failure (bad input, a full disk, Ctrl-C) never leaves a half-written
dataset that a trainer would load, and never touches what was already at the target.
The scratch directory is locked while its export runs (``io.scratch``): what an export
killed outright leaves behind is removed by the next export to the same target, and a
live one's is not.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.errors import ExportError
from ortf_ros.io import atomic
from ortf_ros.io.scratch import remove_stale, scratch_directory


def open_source(dataset: Dataset | str | os.PathLike[str]) -> Dataset:
    """The ORTF dataset to export, opened (an already loaded one is used as it is)."""
    return dataset if isinstance(dataset, Dataset) else load_dataset(dataset)


def check_target(target: Path) -> None:
    """Refuse a destination that holds anything: an export never merges or overwrites."""
    if target.is_dir():
        if any(target.iterdir()):
            raise ExportError(f"{target}: exists and is not empty; expected a new or empty directory")
    elif target.exists():
        raise ExportError(f"{target}: exists and is not a directory; expected a new or empty directory")


@contextlib.contextmanager
def staged_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a scratch directory that becomes ``target`` when the block succeeds."""
    final = Path(target)
    if final.is_symlink():  # a link to an empty directory: that directory is replaced, the link stays
        final = final.resolve()
    check_target(final)
    prefix = f".{final.name}.export-"
    if final.parent.is_dir():
        remove_stale(final.parent, prefix)  # what exports killed earlier left behind
    with scratch_directory(final.parent, prefix) as scratch:
        built = scratch / "export"  # beside the scratch directory's lock, which stays behind
        built.mkdir()
        yield built
        check_target(final)  # nothing appeared there meanwhile
        # rename(2) replaces an empty directory, so an empty target needs no removal.
        os.replace(built, final)
        atomic.fsync_dir(final.parent)
