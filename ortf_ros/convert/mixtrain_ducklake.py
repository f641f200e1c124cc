"""``ortf export mixtrain --table ducklake``: the Mixtrain rows in a DuckLake, the embedded lake.

Mixtrain names DuckLake beside Delta and Iceberg: zero-config, its metadata in a DuckDB
database, for one machine where Delta and Iceberg serve a data platform. Layout: OUT holds
the catalog ``catalog.ducklake`` (a DuckDB file), the data files under ``data/`` (DuckLake's
own layout, ``main/mixtrain/task=<task>/ducklake-<uuid>.parquet``) and the videos under
``_files/<dataset_id>/`` as with the other lakes; the table is ``mixtrain``, partitioned by
``task``. The catalog keeps the data path absolute, as Iceberg's metadata does: OUT is not
moved.

Offline: DuckDB's ``INSTALL ducklake`` downloads the extension. The export loads it
instead from the file the ``duckdb-extension-ducklake`` wheel ships for the installed
DuckDB, with DuckDB's automatic install and load of extensions off: nothing is fetched
at run time, and a DuckDB the wheel has no build for is refused in one line.

The ``mixtrain`` property: DuckLake keeps key-value tags on a table, but DuckDB's SQL sets
one of them, the comment (``COMMENT ON TABLE``, the tag ``comment``): it holds the
property's JSON, whose ``mixtrain`` key marks the table as Mixtrain. Read it with
``SELECT comment FROM duckdb_tables() WHERE table_name = 'mixtrain'``.

Memory: the rows stream to DuckDB as Arrow batches, one episode each, and DuckDB writes a
row group per row (``parquet_row_group_size``, an option of the whole lake) and flushes a
partition's rows at each one (``partitioned_write_flush_threshold``; by default DuckDB
keeps 524,288 rows of each partition: every episode of a task). Measured: 8 and 32 MB of
rows peak at 272 and 276 MB RSS.

Data inlining is off (``DATA_INLINING_ROW_LIMIT 0``): DuckLake would keep a small insert's
rows in the catalog database, and Mixtrain's rows are Parquet files.

One export is one DuckDB transaction, one DuckLake snapshot: the table (a first export),
the columns it adds, the rows and the property. Until its commit no reader sees any of it;
a failure rolls it back. A first ATTACH creates ``catalog.ducklake`` with an empty catalog,
which stays after a failed first export (as Iceberg's ``catalog.db`` does).
"""

from __future__ import annotations

import contextlib
import importlib.resources
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from ortf_ros.convert.mixtrain_lake import PARTITION, LakeRows, refuse_foreign
from ortf_ros.errors import UsageError
from ortf_ros.extras import optional_module

CATALOG = "catalog.ducklake"
DATA_DIR = "data"
TABLE = "mixtrain"
ALIAS = "lake"  # the name the catalog is attached under
EXTENSION_PACKAGE = "duckdb_extension_ducklake"
EXTRA = "lake"
_QUALIFIED = f"{ALIAS}.main.{TABLE}"
_ROWS = "ortf_rows"  # the Arrow stream of rows, as DuckDB sees it


def read_with(target: Path) -> str:
    """The SQL that reads the table back in DuckDB (with the ducklake extension loaded)."""
    return f"duckdb: ATTACH 'ducklake:{target.absolute() / CATALOG}' AS {ALIAS}; FROM {ALIAS}.{TABLE}"


def extension_path(duckdb: Any) -> Path:
    """The ducklake extension the wheel ships for this DuckDB."""
    package = optional_module(EXTENSION_PACKAGE, "a DuckLake table needs duckdb-extension-ducklake", EXTRA)
    folder = importlib.resources.files(package.__name__) / "extensions"
    path = Path(str(folder)) / f"v{duckdb.__version__}" / "ducklake.duckdb_extension"
    if not path.is_file():
        built = sorted(p.name for p in Path(str(folder)).iterdir()) if Path(str(folder)).is_dir() else []
        raise UsageError(
            f"{path}: no ducklake extension for DuckDB {duckdb.__version__} (the wheel has {built or 'none'}); "
            f"expected the duckdb-extension-ducklake that matches it: pip install 'ortf_ros[{EXTRA}]'"
        )
    return path


@contextlib.contextmanager
def attached(target: Path, *, read_only: bool = False) -> Iterator[Any]:
    """A DuckDB connection with the DuckLake at ``target`` attached as ``lake``, the
    extension loaded from its wheel and nothing fetched (a read-only one for readers)."""
    duckdb = optional_module("duckdb", "a DuckLake table needs duckdb", EXTRA)
    with _attached(duckdb, extension_path(duckdb), target, read_only=read_only) as connection:
        yield connection


@contextlib.contextmanager
def _attached(duckdb: Any, extension: Path, target: Path, *, read_only: bool = False) -> Iterator[Any]:
    config = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    connection = duckdb.connect(config=config)
    try:
        connection.load_extension(str(extension))
        options = (
            "READ_ONLY" if read_only else f"DATA_PATH {_literal(str(target / DATA_DIR))}, DATA_INLINING_ROW_LIMIT 0"
        )
        connection.execute(f"ATTACH {_literal(f'ducklake:{target / CATALOG}')} AS {ALIAS} ({options})")
        yield connection
    finally:
        connection.close()


def write_ducklake(rows: LakeRows, target: Path) -> tuple[bool, int]:
    """Create the table at ``target`` or append to it; (created, the snapshot of the commit)."""
    duckdb = optional_module("duckdb", "a DuckLake table needs duckdb", EXTRA)
    extension = extension_path(duckdb)  # before OUT is made
    target = target.absolute()
    refuse_foreign(target, (target / CATALOG).is_file(), f"a DuckLake ({CATALOG})")
    target.mkdir(parents=True, exist_ok=True)  # where DuckDB creates the catalog
    with rows.writing(target, "DuckLake", (duckdb.Error,)), _attached(duckdb, extension, target) as connection:
        # A partitioned write keeps each partition's rows until this many: one, so memory holds an episode.
        connection.execute("SET partitioned_write_flush_threshold = 1")
        exists = _one(connection, f"SELECT count(*) FROM duckdb_tables() WHERE {_THIS_TABLE}") > 0
        stored: str | None = None
        if exists:
            stored = _one(connection, f"SELECT comment FROM duckdb_tables() WHERE {_THIS_TABLE}")
            schema = connection.sql(f"FROM {_QUALIFIED} LIMIT 0").to_arrow_table().schema
            evolution = rows.evolve(target, "DuckLake", schema, stored)
            added, prop = evolution.added, evolution.property
        else:  # the lake's option (DuckLake sets none on a table its transaction creates)
            connection.execute(f"CALL {ALIAS}.set_option('parquet_row_group_size', 1)")
        source: _Batches | None = None
        with rows.claiming_files(target):
            connection.execute("BEGIN TRANSACTION")
            try:
                if not exists:
                    connection.execute(f"CREATE TABLE {_QUALIFIED} ({_columns(connection, list(rows.schema))})")
                    connection.execute(f"ALTER TABLE {_QUALIFIED} SET PARTITIONED BY ({_name(PARTITION)})")
                    added, prop = (), rows.property
                for field in added:  # Parquet files without it read back null in it
                    connection.execute(f"ALTER TABLE {_QUALIFIED} ADD COLUMN {_columns(connection, [field])}")
                if prop != stored:  # (a new table's, or one describing another robot or column)
                    connection.execute(f"COMMENT ON TABLE {_QUALIFIED} IS {_literal(prop)}")
                source = _Batches(rows, target)
                connection.register(_ROWS, pa.RecordBatchReader.from_batches(rows.schema, iter(source)))
                connection.execute(f"INSERT INTO {_QUALIFIED} BY NAME SELECT * FROM {_ROWS}")
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                if source is not None and source.failure is not None:
                    raise source.failure from None  # a missing video as itself, not inside DuckDB's message
                raise
        snapshot = _one(connection, f"SELECT max(snapshot_id) FROM ducklake_snapshots('{ALIAS}')")
    return not exists, int(snapshot)


class _Batches:
    """The rows for DuckDB's Arrow scan, keeping what stopped them: DuckDB reports an
    exception from the stream inside its own error, traceback and all."""

    def __init__(self, rows: LakeRows, target: Path) -> None:
        self.rows, self.target = rows, target
        self.failure: BaseException | None = None

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self.rows.batches(self.target)
        except BaseException as exc:
            self.failure = exc
            raise


_THIS_TABLE = f"database_name = '{ALIAS}' AND schema_name = 'main' AND table_name = '{TABLE}'"


def _one(connection: Any, sql: str) -> Any:
    return connection.execute(sql).fetchone()[0]


def _columns(connection: Any, fields: list[pa.Field]) -> str:
    """Column definitions in DuckDB's types for Arrow's (DuckDB maps them, as when it reads Arrow)."""
    types = connection.from_arrow(pa.schema(fields).empty_table()).dtypes
    return ", ".join(
        f"{_name(field.name)} {kind}{'' if field.nullable else ' NOT NULL'}"
        for field, kind in zip(fields, types, strict=True)
    )


def _name(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
