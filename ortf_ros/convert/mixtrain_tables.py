"""``ortf export mixtrain --table delta|iceberg|ducklake``: the dataset's Mixtrain rows
created as, or appended to, a lake table of the kind asked for. The rows, their schema
evolution and Delta's and Iceberg's writers are ``mixtrain_lake``'s; DuckLake's, which builds
on them, ``mixtrain_ducklake``'s: this module picks one, so neither imports the other's caller.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ortf_ros.convert import mixtrain_ducklake, mixtrain_lake
from ortf_ros.convert.output_dir import open_source
from ortf_ros.dataset.reader import Dataset
from ortf_ros.errors import UsageError


@dataclass(frozen=True)
class LakeResult:
    path: Path
    kind: str
    episodes: int
    steps: int
    created: bool
    version: int  # Delta: the table version; Iceberg: how many snapshots the table has; DuckLake: its snapshot
    read_with: str  # the library call that reads the table back


def to_mixtrain_table(
    dataset: Dataset | str | os.PathLike[str],
    out: str | os.PathLike[str],
    kind: str,
    *,
    catalog: str | None = None,
) -> LakeResult:
    """Create the ``kind`` table at ``out`` (new or empty) or append the dataset to it."""
    if kind not in mixtrain_lake.TABLE_KINDS:
        raise UsageError(f"--table {kind}: unknown table kind; expected one of {', '.join(mixtrain_lake.TABLE_KINDS)}")
    if catalog is not None and kind != "iceberg":
        raise UsageError(
            f"--catalog {catalog}: a catalog is only for --table iceberg (Delta and DuckLake keep theirs in OUT)"
        )
    source = open_source(dataset)
    target = Path(out)
    rows = mixtrain_lake.LakeRows(source)
    if kind == "delta":
        created, version = mixtrain_lake.write_delta(rows, target)
        read_with = f"deltalake.DeltaTable({str(target)!r})"
    elif kind == "ducklake":
        created, version = mixtrain_ducklake.write_ducklake(rows, target)
        read_with = mixtrain_ducklake.read_with(target)
    else:
        created, version = mixtrain_lake.write_iceberg(rows, target, catalog)
        uri = catalog or mixtrain_lake.default_catalog(target)
        name = ".".join(mixtrain_lake.ICEBERG_TABLE)
        read_with = f"pyiceberg SqlCatalog({mixtrain_lake.CATALOG_NAME!r}, uri={uri!r}).load_table({name!r})"
    return LakeResult(target, kind, rows.episodes, rows.steps, created, version, read_with)
