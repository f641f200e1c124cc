"""``ortf.convert``: the spec's conversions, ``to_lerobot(ds, out)`` and ``to_rlds(ds, out)``.

Each is the export ``ortf export lerobot|rlds`` runs (``ortf_ros.convert``), with the
checks that command makes first: the source must be an ORTF dataset directory (or a
dataset ``ortf.load_dataset`` opened) and the output a new or empty directory apart
from it; a bad one raises a ``UsageError`` naming the path and what was expected,
before anything is read or written. The export is built beside ``out`` and renamed
onto it when whole, so a failure leaves ``out`` as it was.

Options beyond the spec's two arguments are the exports' own keyword arguments
(``ortf_ros.convert.lerobot_export.to_lerobot``, ``ortf_ros.convert.rlds_export.to_rlds``),
passed through unchanged; an unknown one is a ``UsageError`` listing those accepted.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ortf_ros.convert import lerobot_export, rlds_export
from ortf_ros.convert.lerobot_common import ExportSummary
from ortf_ros.convert.lerobot_export import Flavor
from ortf_ros.convert.rlds_export import RldsResult
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.errors import UsageError, naming
from ortf_ros.io import paths

__all__ = ["ExportSummary", "RldsResult", "to_lerobot", "to_rlds"]

Source = Dataset | str | os.PathLike[str]
"""What a conversion reads: a dataset ``load_dataset`` opened, or the path of one."""


def to_lerobot(
    dataset: Source, out: str | os.PathLike[str], flavor: Flavor = "lerobot", **options: Any
) -> ExportSummary:
    """Write ``dataset`` to the new directory ``out`` as a LeRobotDataset v3.0 (``flavor="gr00t"``:
    GR00T's LeRobot v2.0 flavour), as ``ortf export lerobot`` does. Options: ``settings``
    (re-encode ``VideoSettings``), ``data_files_size_in_mb``, ``video_files_size_in_mb``,
    ``progress``. Returns what was written (episodes, frames, videos reused or re-encoded)."""
    export = lerobot_export.to_lerobot
    _check_options(export, options)
    source, target = _checked_paths(dataset, out, "lerobot")
    with naming(target):
        return export(source, target, flavor, **options)


def to_rlds(dataset: Source, out: str | os.PathLike[str], **options: Any) -> RldsResult:
    """Write ``dataset`` to the new directory ``out`` as an RLDS dataset in TFDS's layout
    (``tfds.builder_from_directory(out)`` reads it), as ``ortf export rlds`` does. Needs
    the ``rlds`` extra (TensorFlow Datasets): without it, a ``UsageError`` that says the
    pip command. Options: ``episodes_per_shard``."""
    export = rlds_export.to_rlds
    _check_options(export, options)
    source, target = _checked_paths(dataset, out, "rlds")
    with naming(target):
        return export(source, target, **options)


def _check_options(export: Callable[..., object], options: Mapping[str, object]) -> None:
    """Options the export does not take are refused by name, before any path is looked at."""
    parameters = inspect.signature(export).parameters.values()
    accepted = [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise UsageError(
            f"{export.__name__}: unknown option(s) {', '.join(unknown)}; expected some of {', '.join(accepted)}"
        )


def _checked_paths(dataset: Source, out: str | os.PathLike[str], target_format: str) -> tuple[Dataset, Path]:
    """The source opened and the output checked as ``ortf export FORMAT`` checks them
    (``ortf_ros.io.paths``): an existing dataset directory, a new or empty output apart from it."""
    if isinstance(dataset, Dataset):
        source = dataset
    else:
        word = _path_word(dataset, "dataset", "a dataset opened by ortf.load_dataset or the path of one")
        source = load_dataset(paths.input_dir(word, "an ORTF dataset directory"))
    word = _path_word(out, "out", "the path of a new or empty directory")
    target = paths.output_dir(word, f"the {target_format} output", existing=None, inputs=[source.root])
    return source, target


def _path_word(value: object, argument: str, expected: str) -> str:
    """A path argument as the text ``ortf_ros.io.paths`` checks; anything else is refused by its type."""
    if isinstance(value, (str, os.PathLike)):
        return os.fsdecode(value)
    raise UsageError(f"{argument}: got {type(value).__name__}; expected {expected}")
