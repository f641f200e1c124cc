"""The Mixtrain rows in a data lake table: the rows and their schema evolution shared by
the three lakes, and Delta's and Iceberg's writers (``mixtrain_tables`` runs ``ortf export
mixtrain --table delta|iceberg|ducklake``; DuckLake's writer is ``mixtrain_ducklake``).

Mixtrain says a dataset works "cloud-native with open table formats", its metadata held
by the table property ``mixtrain`` instead of ``mixtrain.json``. The rows are those of the
standalone export (``mixtrain_export.episode_row``), with two differences the lakes force:

- Trajectories are ``list<list<float32>>`` without the fixed inner size: neither Delta
  nor Iceberg has a fixed-size list type. The size stays in the property (``dim``).
- Videos are copied to ``_files/<dataset_id>/<camera>/ep_<id>.<ext>`` under OUT and
  referenced relative to OUT (the dataset root Mixtrain resolves paths against). The
  leading ``_`` keeps them out of Delta's ``vacuum(full=True)``, which deletes every file
  not in its log except under ``_``/``.`` directories; the dataset id keeps a second
  dataset's episode 0 from replacing the first's.

The tables are partitioned by ``task`` (Iceberg: identity transform), and a second
export into the same OUT appends: one new Delta version, one new Iceberg or DuckLake
snapshot. The table takes many robots, by the lakes' schema evolution:

- a column the table has and the dataset lacks (a sensor another robot has) is null in
  the dataset's rows: its data files are written without it, and each lake reads a
  missing column as null;
- a column the dataset adds is added to the table (null in the rows already there), and
  its ``column_types`` entry to the property;
- a column both have must have the same Parquet type and the same Mixtrain ``type``
  (a trajectory never becomes a video): else the export is refused, in one line naming
  the column and both, before anything is written;
- its meaning (``dim``, ``names``, ``units``, a camera's ``resolution``...) may differ by
  robot, since mixing robots is what the table is for: a 7-joint arm's ``action`` and a
  6-joint one's. The entry's fields are the meaning of the robot that brought the
  column; a robot whose meaning differs gets its own under ``by_robot`` (keyed by the
  rows' ``robot`` column), which replaces them for its rows. A robot keeps one meaning
  of a column of values its rows have (``ortf.robots``; trajectories, timestamps): a
  dataset of it that differs is refused. Of a file column (video, audio, lidar) another
  recording of it at another resolution or rate appends: each file says its own.
  A table whose property lists no robots (made by another tool) takes no other meaning.

Another dataset only: one already there would have its rows twice. The property's
``ortf`` block names the first dataset exported, and ``robots`` each robot in the table
with the columns its rows have (what tells whose rows the entry's own fields describe).

Layout: Delta, the table itself is OUT (``_delta_log/``). Iceberg, OUT holds the SQL
catalog ``catalog.db`` (SQLite, unless ``--catalog URI`` names another SQL catalog) and
the warehouse ``warehouse/`` with table ``ortf.mixtrain``.
DuckLake: ``convert.mixtrain_ducklake``.

Memory: rows are produced one episode at a time. Delta: written by pyarrow, one row
group per episode, and committed by delta-rs as one transaction (measured: 8 and 32 MB
of rows both peak at 245 MB RSS; delta-rs's own ``write_deltalake`` held a whole file's
rows, 170 MB more for the 32); each file's statistics (null counts, bounds of the scalar
columns) are read from its footer, so readers can skip files as with delta-rs's.
Iceberg: the same files (with the task column, as Iceberg keeps it), added to one
snapshot with pyiceberg's ``add_files``, which takes their statistics and partition
from the footers (pyiceberg's ``append`` streams unpartitioned tables only; measured:
253 MB RSS for 8 and for 32 MB of rows).

What holds after a crash:
- A new Delta table is built in a scratch directory beside OUT and renamed onto it, so
  OUT is a whole table or nothing. (delta-rs refuses other keys than ``delta.*`` when it
  creates a table, so the property is set by a second commit: a new table starts at
  version 1; that happens before the rename.)
- A new Iceberg table is created and filled in one catalog commit: until it, the catalog
  has no such table. Its metadata holds absolute paths, so it is not built elsewhere and
  renamed.
- An append is the lake's own transaction (one Delta commit, one Iceberg snapshot).
  Delta's appends that add columns or change the property commit before it (delta-rs's
  ``alter`` adds the columns, then sets the property; its add-action commit sets no
  schema): a crash between them leaves a table with the new columns null in every row,
  or a robot described that has no rows yet, and valid.
- Videos and data files are written before the commit that names them (Mixtrain: "write
  the file first, then insert the row"): never a row without its file. An export that
  fails removes its videos (``_files/<dataset_id>``); one killed leaves them, and the
  next export of that dataset is refused naming the directory. Data files a failed
  commit did not name stay, unreferenced, for the lake's orphan-file clean-up.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.convert.mixtrain_export import episode_row, row_schema, sidecar
from ortf_ros.convert.output_dir import staged_directory
from ortf_ros.dataset.reader import Dataset, Episode
from ortf_ros.errors import ExportError, UsageError
from ortf_ros.extras import optional_module
from ortf_ros.format.manifest import Manifest
from ortf_ros.io import atomic

TABLE_KINDS = ("delta", "iceberg", "ducklake")
PROPERTY = "mixtrain"
PARTITION = "task"
FILES_DIR = "_files"
DELTA_LOG = "_delta_log"
CATALOG_FILE = "catalog.db"
WAREHOUSE_DIR = "warehouse"
CATALOG_NAME = "ortf"  # a SQL catalog keys its tables by catalog name: readers open it by this one
ICEBERG_TABLE = ("ortf", "mixtrain")
EXTRA = "lake"


def default_catalog(target: Path) -> str:
    """The embedded catalog: SQLite in OUT."""
    return f"sqlite:///{target.absolute() / CATALOG_FILE}"


def lake_schema(manifest: Manifest) -> pa.Schema:
    """The standalone export's row schema with plain lists in place of fixed-size ones."""
    return pa.schema([field.with_type(_plain_lists(field.type)) for field in row_schema(manifest)])


def _plain_lists(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
        return pa.list_(_plain_lists(kind.value_type))
    return kind


class LakeRows:
    """The dataset's rows for a lake table at ``root``, one episode at a time; counts what it gave."""

    def __init__(self, source: Dataset) -> None:
        self.source = source
        self.schema = lake_schema(source.manifest)
        self.robot = source.manifest.robot.name
        described = sidecar(source.manifest)
        described["ortf"][ROBOTS] = {self.robot: sorted(described["column_types"])}
        self.property = json.dumps(described, sort_keys=True)
        self.episodes = self.steps = 0

    def batches(self, root: Path) -> Iterator[pa.RecordBatch]:
        files_dir = self.files_dir
        standalone = row_schema(self.source.manifest)
        for record in self.source.episodes:
            with Episode(self.source, record) as episode:
                row = episode_row(episode, standalone, root, files_dir).cast(self.schema)
            self.episodes += 1
            self.steps += record.length
            yield from row.to_batches()

    @contextlib.contextmanager
    def writing(self, target: Path, kind: str, lake_errors: tuple[type[Exception], ...]) -> Iterator[None]:
        """A lake library's refusal (a log it cannot read, a commit that lost a race) as
        one line naming OUT: a failed conversion, not a traceback."""
        try:
            yield
        except lake_errors as exc:
            reason = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            raise ExportError(f"{target}: the {kind} write failed: {reason}") from None

    @property
    def files_dir(self) -> str:
        return f"{FILES_DIR}/{self.source.manifest.dataset_id}"

    @contextlib.contextmanager
    def claiming_files(self, root: Path) -> Iterator[None]:
        """Make ``_files/<dataset_id>`` for the block: a dataset already in the table is
        refused (its rows would be there twice, its videos copied over the files its rows
        name). Removed again when the block fails before its commit, so the export can be
        run again; after a kill it stays, and the refusal says what to remove."""
        folder = root / self.files_dir
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            raise UsageError(
                f"{root}: dataset {self.source.manifest.dataset_id} is already in this table ({self.files_dir}/ "
                "exists); expected another dataset (remove that directory if an export of it was killed)"
            ) from None
        try:
            yield
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # this export's own copies, which no row names
            raise

    def evolve(self, target: Path, kind: str, schema: pa.Schema, stored: str | None) -> Evolution:
        """What appending these rows to a table of ``schema`` (whose property is ``stored``)
        changes: the columns the rows add, and the property that then describes the table
        (new columns' entries, this robot's own meaning where it differs, the robot listed).
        Columns the table has and the rows lack stay, null in these rows. A column both
        have must have one Parquet type and one Mixtrain ``type``, and a robot already in
        the table one meaning; else the export is refused in one line naming the column,
        before anything is written."""
        table = {f.name: _normal(f.type) for f in schema}
        for field in self.schema:
            if field.name in table and table[field.name] != _normal(field.type):
                raise ExportError(
                    f"{target}: column {field.name} is {table[field.name]} in the {kind} table, "
                    f"{_normal(field.type)} in this dataset's rows; expected the same type to append"
                )
        ours = json.loads(self.property)
        theirs = _described(target, stored)
        table_types = theirs.get("column_types", {})
        robots = (theirs.get("ortf") or {}).get(ROBOTS)  # robot -> the columns its rows have; None: not listed
        has = set(robots.get(self.robot, ())) if isinstance(robots, dict) else set()
        merged_types = dict(table_types)
        for name, mine in ours["column_types"].items():
            if name not in table:  # a new column: its entry joins the property
                merged_types[name] = mine
                continue
            held = table_types.get(name)
            held = held if isinstance(held, dict) else {}
            if held.get("type") != mine.get("type"):
                raise ExportError(
                    f"{target}: column {name}: type is {held.get('type')} in the table's '{PROPERTY}' property, "
                    f"{mine.get('type')} in this dataset; expected the same to append"
                )
            others = held.get(BY_ROBOT) or {}
            meaning, wanted = others.get(self.robot) or _meaning(held), _meaning(mine)
            if _same(meaning, wanted):
                continue
            key = next(k for k in _keys(meaning, wanted) if not _same(meaning.get(k), wanted.get(k)))
            differs = f"{key} is {meaning.get(key)}"
            if not isinstance(robots, dict):
                raise ExportError(
                    f"{target}: column {name}: {differs} in the table's '{PROPERTY}' property, {wanted.get(key)} in "
                    f"this dataset, and the property lists no robots (ortf.{ROBOTS}) to tell whose rows each meaning "
                    "is; expected the same to append"
                )
            if self.robot in others or name in has:
                if mine.get("type") not in VALUE_TYPES:  # (its files say their own fps, resolution, rate)
                    continue
                raise ExportError(
                    f"{target}: column {name}: {differs} for robot {self.robot} in the table's '{PROPERTY}' property, "
                    f"{wanted.get(key)} in this dataset; expected the same to append (a robot keeps one meaning per "
                    "column; another robot may have its own)"
                )
            merged_types[name] = held | {BY_ROBOT: others | {self.robot: wanted}}
        merged = (theirs or {k: v for k, v in ours.items() if k != "column_types"}) | {"column_types": merged_types}
        if isinstance(robots, dict) or not theirs:  # (a table that lists none: its first robots are unknown)
            listed = robots if isinstance(robots, dict) else {}
            merged["ortf"] = (merged.get("ortf") or {}) | {
                ROBOTS: listed | {self.robot: sorted(has | set(ours["column_types"]))}
            }
        added = tuple(field for field in self.schema if field.name not in table)
        return Evolution(added, json.dumps(merged, sort_keys=True))


def _described(target: Path, stored: str | None) -> dict[str, Any]:
    """The table's property as Mixtrain's object ({} for none), or one line saying what it is not."""
    if not stored:
        return {}
    try:
        found = json.loads(stored)
    except ValueError:
        found = None
    ortf = found.get("ortf", {}) if isinstance(found, dict) else None
    robots = ortf.get(ROBOTS, {}) if isinstance(ortf, dict) else None
    if (
        not isinstance(found, dict)
        or not isinstance(found.get("column_types", {}), dict)
        or not isinstance(robots, dict)
        or not all(isinstance(columns, list) for columns in robots.values())
    ):
        raise ExportError(
            f"{target}: the table's '{PROPERTY}' property is not Mixtrain's JSON object (its column_types, and "
            f"ortf.{ROBOTS} each robot's list of columns); "
            "expected a table made by ortf export mixtrain"
        )
    return found


BY_ROBOT = "by_robot"
"""A column entry's meanings of other robots than the one whose fields it has."""
ROBOTS = "robots"
"""The property's ``ortf`` key: each robot in the table, with the columns its rows have."""


def _meaning(entry: dict[str, Any]) -> dict[str, Any]:
    """A column entry's meaning: its fields but the Mixtrain type and the other robots'."""
    return {k: v for k, v in entry.items() if k not in ("type", BY_ROBOT)}


VALUE_TYPES = ("trajectory", "timestamps")
"""Columns whose row values the entry gives the meaning of, which one robot keeps. A file
column's entry (video, audio, lidar) describes the files the robot first brought; another
recording of it at another resolution or rate appends, since each file says its own."""
MEASURED_TOLERANCE = 0.01
"""Relative difference within which two numbers of a meaning are one: some are measured
(a lidar's ``scan_rate``, ``time_increment``), and two recordings of one robot differ in
them by hundredths of a percent; a declared one (``dim``, a resolution) differs by far more."""


def _same(a: Any, b: Any) -> bool:
    """Whether two meanings (or their fields) are one, numbers within ``MEASURED_TOLERANCE``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if _number(a) and _number(b):
        return math.isclose(a, b, rel_tol=MEASURED_TOLERANCE)
    return bool(a == b)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _keys(*entries: dict[str, Any]) -> list[str]:
    """The fields of entries, what a column is (``dim``) before what its values mean."""
    return sorted(set().union(*entries), key=lambda k: (k != "dim", k))


@dataclass(frozen=True)
class Evolution:
    """An append's change to the table: ``added`` columns (after the table's own), and the
    ``property`` that then describes every column and robot (set where it differs from the
    table's)."""

    added: tuple[pa.Field, ...]
    property: str


def _normal(kind: pa.DataType) -> str:
    """A type as both lakes hand it back: large strings and lists as plain ones, no field names."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return f"list<{_normal(kind.value_type)}>"
    if pa.types.is_large_string(kind):
        return str(pa.string())
    return str(kind)


def refuse_foreign(target: Path, is_table: bool, what: str) -> None:
    if target.is_dir() and any(target.iterdir()) and not is_table:
        raise UsageError(
            f"{target}: exists and is neither empty nor {what}; expected a new or empty directory or {what}"
        )


def write_delta(rows: LakeRows, target: Path) -> tuple[bool, int]:
    deltalake = optional_module("deltalake", "a Delta Lake table needs deltalake", EXTRA)
    existing = (target / DELTA_LOG).is_dir()
    refuse_foreign(target, existing, "a Delta table")
    schema = deltalake.Schema.from_arrow(rows.schema)
    if existing:
        with rows.writing(target, "Delta", (deltalake.exceptions.DeltaError,)):
            table = deltalake.DeltaTable(str(target))
            stored = table.metadata().configuration.get(PROPERTY)
            evolution = rows.evolve(target, "Delta", pa.schema(table.schema().to_arrow()), stored)
            with rows.claiming_files(target):
                actions = _delta_actions(_write_data_files(rows, target, target, with_task=False), deltalake)
                if evolution.added:  # files without a column read back null in it: Delta's schema evolution
                    table.alter.add_columns(list(deltalake.Schema.from_arrow(pa.schema(evolution.added)).fields))
                if evolution.property != stored:
                    table.alter.set_table_properties({PROPERTY: evolution.property}, raise_if_not_exists=False)
                merged = deltalake.Schema.from_arrow(pa.schema(table.schema().to_arrow()))
                table.create_write_transaction(actions, mode="append", schema=merged, partition_by=[PARTITION])
            return False, int(deltalake.DeltaTable(str(target)).version())
    with staged_directory(target) as scratch:
        # Paths in the log are relative to the table: the scratch directory renames whole.
        with rows.writing(target, "Delta", (deltalake.exceptions.DeltaError,)):
            actions = _delta_actions(_write_data_files(rows, scratch, scratch, with_task=False), deltalake)
            deltalake.transaction.create_table_with_add_actions(
                str(scratch), schema, actions, mode="error", partition_by=[PARTITION]
            )
            built = deltalake.DeltaTable(str(scratch))
            built.alter.set_table_properties({PROPERTY: rows.property}, raise_if_not_exists=False)
        version = int(deltalake.DeltaTable(str(scratch)).version())
    return True, version


@dataclass(frozen=True)
class DataFile:
    path: Path
    task: str | None
    rows: int


def _write_data_files(rows: LakeRows, root: Path, directory: Path, *, with_task: bool) -> list[DataFile]:
    """The rows as Parquet files in ``directory``, one per task, one row group per
    episode, as the standalone export writes them: memory holds one episode's row
    (delta-rs's and pyiceberg's own writers hold a file's rows, or the whole table when it
    is partitioned). Videos are copied under ``root``. Delta keeps the task in its log
    only, Iceberg in the files too (``with_task``). Each file is on disk before it is
    committed."""
    schema = rows.schema if with_task else rows.schema.remove(rows.schema.get_field_index(PARTITION))
    prefix = f"part-{uuid.uuid4()}"
    directory.mkdir(parents=True, exist_ok=True)
    writers: dict[str | None, pq.ParquetWriter] = {}
    files: dict[str | None, DataFile] = {}
    try:
        for batch in rows.batches(root):  # one episode's row each
            task = batch.column(PARTITION)[0].as_py()
            if task not in writers:
                path = directory / f"{prefix}-{len(writers):05d}.parquet"
                writers[task] = pq.ParquetWriter(path, schema)
                files[task] = DataFile(path, task, 0)
            writers[task].write_batch(batch if with_task else batch.drop_columns([PARTITION]))
            files[task] = replace(files[task], rows=files[task].rows + batch.num_rows)
    finally:
        for writer in writers.values():
            writer.close()
    for file in files.values():
        atomic.fsync_file(file.path)
    return list(files.values())


def _delta_actions(files: list[DataFile], deltalake: Any) -> list[Any]:
    """The add actions that commit ``files`` (in the table's root) to a Delta table."""
    actions = []
    for file in files:
        stat = file.path.stat()
        stats = json.dumps(_delta_stats(pq.read_metadata(file.path), file.rows))
        modified_ms = stat.st_mtime_ns // 1_000_000
        actions.append(
            deltalake.transaction.AddAction(
                file.path.name, stat.st_size, {PARTITION: file.task}, modified_ms, True, stats
            )
        )
    return actions


def _delta_stats(metadata: pq.FileMetaData, rows: int) -> dict[str, Any]:
    """A file's Delta statistics from its Parquet footer: null counts, and minimum and
    maximum of the scalar columns (what lets a reader skip the file on ``success`` or
    ``robot``). A column is left out where a row group has no statistics for it, as
    Delta allows: a bound that is not exact would make readers skip rows."""
    stats: dict[str, Any] = {"numRecords": rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for index in range(metadata.num_columns):
        chunks = [metadata.row_group(g).column(index) for g in range(metadata.num_row_groups)]
        if not chunks or chunks[0].path_in_schema.count(".") or chunks[0].physical_type == "BOOLEAN":
            continue  # list columns have no file-level bounds in Delta; booleans: none kept either
        if not all(c.is_stats_set and c.statistics.has_null_count for c in chunks):
            continue
        name = chunks[0].path_in_schema
        stats["nullCount"][name] = sum(c.statistics.null_count for c in chunks)
        bounded = [c.statistics for c in chunks if c.statistics.has_min_max]
        if bounded and len(bounded) == sum(1 for c in chunks if c.statistics.null_count < c.num_values):
            stats["minValues"][name] = min(b.min for b in bounded)
            stats["maxValues"][name] = max(b.max for b in bounded)
    return stats


def write_iceberg(rows: LakeRows, target: Path, catalog_uri: str | None) -> tuple[bool, int]:
    sql = optional_module("pyiceberg.catalog.sql", "an Iceberg table needs pyiceberg with SQLite support", EXTRA)
    target = target.absolute()
    if catalog_uri is None:
        refuse_foreign(target, (target / CATALOG_FILE).is_file(), f"an Iceberg warehouse ({CATALOG_FILE})")
        target.mkdir(parents=True, exist_ok=True)  # where SQLite creates the catalog
    else:
        refuse_foreign(target, (target / WAREHOUSE_DIR).is_dir(), f"an Iceberg warehouse ({WAREHOUSE_DIR}/)")
    uri = catalog_uri or default_catalog(target)
    try:
        catalog = sql.SqlCatalog(CATALOG_NAME, uri=uri, warehouse=(target / WAREHOUSE_DIR).as_uri())
        catalog.create_namespace_if_not_exists(ICEBERG_TABLE[0])
        exists = catalog.table_exists(ICEBERG_TABLE)
    except Exception as exc:  # SQLAlchemy's errors for a URI it cannot open, by driver
        raise UsageError(f"--catalog {uri}: cannot open this SQL catalog ({exc.__class__.__name__})") from None
    lake_errors = (optional_module("pyiceberg.exceptions", "pyiceberg", EXTRA).CommitFailedException,)
    if exists:
        table = catalog.load_table(ICEBERG_TABLE)
        evolution = rows.evolve(target, "Iceberg", table.schema().as_arrow(), table.properties.get(PROPERTY))
        with (
            rows.writing(target, "Iceberg", lake_errors),
            rows.claiming_files(target),
            table.transaction() as transaction,
        ):
            if evolution.added:  # one snapshot: the new columns, the property describing them, the rows
                with transaction.update_schema() as update:
                    update.union_by_name(pa.schema(evolution.added))
            if evolution.property != table.properties.get(PROPERTY):
                transaction.set_properties({PROPERTY: evolution.property})
            _add_files(transaction, rows, target)
    else:
        properties = {PROPERTY: rows.property}
        create = catalog.create_table_transaction(ICEBERG_TABLE, schema=rows.schema, properties=properties)
        with rows.writing(target, "Iceberg", lake_errors), rows.claiming_files(target), create as transaction:
            with transaction.update_spec() as spec:
                spec.add_identity(PARTITION)
            _add_files(transaction, rows, target)
    return not exists, len(catalog.load_table(ICEBERG_TABLE).snapshots())


def _add_files(transaction: Any, rows: LakeRows, target: Path) -> None:
    """The rows as data files under the table's location, added in one snapshot (pyiceberg
    finds each file's partition from its task column, the same in every row)."""
    location = urllib.parse.urlparse(transaction.table_metadata.location)
    if location.scheme not in ("", "file"):
        raise ExportError(f"{target}: the table lives at {location.geturl()}; expected a local directory")
    files = _write_data_files(rows, target, Path(location.path) / "data", with_task=True)
    if files:
        transaction.add_files([file.path.as_uri() for file in files])
