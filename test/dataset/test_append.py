"""Commits that write their own episode only (issue 20): steps appended to the chunk's table in
place, streams in files of their own, earlier bytes never rewritten, the spec's files readable by
plain tools after every commit, and datasets written before the change still read, validated and
appended to."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataset.test_native_streams import assert_only_late_camera_steps, manifest, record
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.staging import staged_episode_dirs
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import FormatError, ThriftError, WriterError
from ortf_ros.format import layout
from ortf_ros.io import parquet_append
from ortf_ros.io import thrift_compact as thrift

RESOURCES = Path(__file__).with_name("resources")
LEGACY = RESOURCES / "ortf-before-issue-20"
STEPS = layout.steps_path(0)


def data_region(path: Path) -> bytes:
    """The row group bytes of a Parquet file: all of it before the footer."""
    return path.read_bytes()[: parquet_append.read_tail(path).data_end]


def spec_reader_episodes(root: Path) -> dict[str, int]:
    """Rows per episode as a reader that knows only the spec sees them (DuckDB, no ortf_ros)."""
    rows = duckdb.execute(f"SELECT episode_id, count(*) FROM '{root / STEPS}' GROUP BY 1 ORDER BY 1").fetchall()
    return dict(rows)


def test_each_commit_leaves_the_earlier_rows_in_place_and_every_episode_readable(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    streams_before: dict[str, bytes] = {}
    with DatasetWriter(root, manifest()) as writer:
        for episode in range(6):
            before = data_region(root / STEPS) if episode else b""
            record(writer, steps=10 + episode)
            writer.end_episode(success=True)
            assert data_region(root / STEPS).startswith(before)
            index = pq.read_table(root / layout.EPISODES)
            assert index.num_rows == episode + 1
            assert spec_reader_episodes(root) == {f"{e:06d}": 10 + e for e in range(episode + 1)}
            for name, data in streams_before.items():
                assert (root / name).read_bytes() == data  # a stream file is written once
            name = layout.episode_stream_path(0, "wrist_ft", episode)
            streams_before[name] = (root / name).read_bytes()
    metadata = pq.read_metadata(root / STEPS)
    assert metadata.num_row_groups == 6 and metadata.num_rows == sum(range(10, 16))
    assert not (root / layout.stream_path(0, "wrist_ft")).exists()
    assert load_dataset(root).manifest.stream_files == layout.STREAM_FILES_PER_EPISODE
    assert_only_late_camera_steps(root)
    dataset = load_dataset(root)
    for read in dataset:
        first = read.record.start_step
        assert read.array("step_index").tolist() == list(range(first, first + read.record.length))
        samples = read.stream("wrist_ft")
        assert samples["sample_index"].to_pylist() == list(range(samples.num_rows))


def test_the_footer_codec_gives_back_arrows_own_bytes(tmp_path: Path) -> None:
    """The offsets are moved by decoding and encoding Arrow's footer: an encoder that differed from
    Thrift's in any choice would change the bytes (and perhaps what readers understand)."""
    root = tmp_path / "ds"
    with DatasetWriter(root, manifest()) as writer:
        for _ in range(3):
            record(writer)
            writer.end_episode()
    for path in (root / STEPS, root / layout.EPISODES, root / layout.episode_stream_path(0, "wrist_ft", 1)):
        footer = parquet_append.read_tail(path).footer[: -parquet_append.TRAILER]
        decoded, used = thrift.decode_struct(footer)
        assert used == len(footer)
        assert thrift.encode_struct(decoded) == footer
    with pytest.raises(ThriftError):
        thrift.decode_struct(footer[: len(footer) // 2])


def test_an_append_is_undone_exactly_and_refuses_what_it_cannot_append_to(tmp_path: Path) -> None:
    schema = pa.schema([("episode_id", pa.string()), ("value", pa.float64())])
    target, journal = tmp_path / "table.parquet", tmp_path / "append.journal"

    def piece(name: str, rows: int) -> Path:
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"episode_id": [name] * rows, "value": np.arange(rows, dtype=float)}, schema), path)
        return path

    parquet_append.append_row_groups(target, piece("a", 5), journal)  # made by the append
    parquet_append.cut_back(target, journal)
    assert not target.exists() and not journal.exists()
    parquet_append.append_row_groups(target, piece("a", 5), journal)
    parquet_append.settle(journal)
    before = target.read_bytes()
    parquet_append.append_row_groups(target, piece("b", 300), journal)
    assert pq.read_table(target)["episode_id"].to_pylist() == ["a"] * 5 + ["b"] * 300
    with pytest.raises(FileExistsError, match="not settled"):
        parquet_append.append_row_groups(target, piece("c", 1), journal)
    parquet_append.cut_back(target, journal)
    assert target.read_bytes() == before

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"episode_id": ["x"], "value": [1]}), other)  # int64, not float64
    with pytest.raises(FormatError, match="columns differ"):
        parquet_append.append_row_groups(target, other, journal)
    assert target.read_bytes() == before and not journal.exists()
    (tmp_path / "not.parquet").write_bytes(b"PAR1" + b"\0" * 20)
    with pytest.raises(FormatError, match="not a plain Parquet file"):
        parquet_append.read_tail(tmp_path / "not.parquet")


OFFSETS = ("file_offset", "data_page_offset", "dictionary_page_offset")


def chunk_dicts(metadata: pq.FileMetaData, group: int) -> list[dict[str, object]]:
    return [metadata.row_group(group).column(c).to_dict() for c in range(metadata.num_columns)]


@pytest.mark.parametrize("store_schema", [True, False], ids=["ours", "another-writers-footer"])
def test_the_merged_footer_lists_old_row_groups_as_they_were_and_the_new_ones_moved(
    tmp_path: Path, store_schema: bool
) -> None:
    """The footer is merged as bytes: the committed row groups' metadata must come out as it went
    in, and the piece's exactly as pyarrow wrote it but for the offsets, moved by where its rows
    landed. A target whose footer ends otherwise than ours (no Arrow schema stored, as another
    writer's) takes the slow way, through every row group, to the same result."""
    schema = pa.schema([("episode_id", pa.string()), ("value", pa.float64()), ("v", pa.list_(pa.float32(), 3))])

    def table(name: str, rows: int) -> pa.Table:
        values = np.arange(rows, dtype=float)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.ones(rows * 3, np.float32)), 3)
        return pa.table({"episode_id": [name] * rows, "value": values, "v": vectors}, schema=schema)

    target, journal, piece = tmp_path / "t.parquet", tmp_path / "j", tmp_path / "p.parquet"
    with pq.ParquetWriter(target, schema, compression="zstd", store_schema=store_schema) as writer:
        for name in ("a", "b", "c"):
            writer.write_table(table(name, 100))
    before = pq.read_metadata(target)
    with pq.ParquetWriter(piece, schema, compression="zstd", use_dictionary=["episode_id"]) as writer:
        writer.write_table(table("d", 70))
        writer.write_table(table("d", 5))
    written = pq.read_metadata(piece)
    landed = parquet_append.read_tail(target).data_end - len(parquet_append.MAGIC)
    parquet_append.append_row_groups(target, piece, journal)
    after = pq.read_metadata(target)
    assert (after.num_row_groups, after.num_rows) == (5, 375)
    assert all(chunk_dicts(after, g) == chunk_dicts(before, g) for g in range(3))
    for group in range(2):
        expected = chunk_dicts(written, group)
        for chunk in expected:
            chunk.update({key: chunk[key] + landed for key in OFFSETS if chunk[key] is not None})  # type: ignore[operator]
        assert chunk_dicts(after, 3 + group) == expected
    assert pq.read_table(target)["episode_id"].to_pylist() == ["a"] * 100 + ["b"] * 100 + ["c"] * 100 + ["d"] * 75
    assert duckdb.execute(f"SELECT sum(value) FROM '{target}' WHERE episode_id = 'd'").fetchall() == [
        (float(sum(range(70)) + sum(range(5))),)
    ]


def test_a_commit_failing_inside_its_append_cuts_the_table_back_and_recover_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk halfway through the rows: the chunk's table is as before, so the writer can go
    on with the next episode; the failed one stays staged and `ortf recover` commits it."""
    root = tmp_path / "ds"
    with DatasetWriter(root, manifest()) as writer:
        record(writer)
        writer.end_episode()
        before = (root / STEPS).read_bytes()

        def full_disk(source: object, target: object, count: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        with monkeypatch.context() as patch:
            patch.setattr(parquet_append, "_copy", full_disk)
            record(writer)
            with pytest.raises(WriterError, match="No space left on device.*stays staged"):
                writer.end_episode(success=True, operator_notes="the full disk")
        assert (root / STEPS).read_bytes() == before
        assert len(staged_episode_dirs(root)) == 1
        record(writer)
        writer.end_episode(success=False)
    assert ortf(["recover", str(root)]) == 0
    dataset = load_dataset(root)
    assert [(e.episode_id, e.record.operator_notes) for e in dataset] == [
        ("000000", None),
        ("000002", None),
        ("000001", "the full disk"),
    ]
    assert spec_reader_episodes(root) == {"000000": 15, "000001": 15, "000002": 15}
    assert_only_late_camera_steps(root)


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    root = tmp_path / "legacy"
    shutil.copytree(LEGACY, root)
    return root


def test_a_dataset_written_before_per_episode_stream_files_reads_validates_and_appends(legacy: Path) -> None:
    """Not migrated: it keeps its layout (no ``native_stream_files`` key: one stream table per
    chunk), and new episodes are appended to that table as to the step table."""
    table = legacy / layout.stream_path(0, "wrist_ft")
    assert table.is_file() and load_dataset(legacy).manifest.stream_files == layout.STREAM_FILES_PER_CHUNK
    assert_only_late_camera_steps(legacy)
    old = load_dataset(legacy)
    old_samples = [e.stream("wrist_ft") for e in old]
    old_steps = [e.steps() for e in old]
    assert [len(s) for s in old_samples] == [467, 467]
    steps_data, stream_data = data_region(legacy / STEPS), data_region(table)

    with DatasetWriter(legacy) as writer:
        for _ in range(2):
            record(writer)
            writer.end_episode(success=True)
    assert data_region(legacy / STEPS).startswith(steps_data)
    assert data_region(table).startswith(stream_data)
    assert not (legacy / layout.episode_stream_dir(0, "wrist_ft")).exists()
    assert layout.STREAM_FILES_KEY not in load_dataset(legacy).manifest.extra
    assert_only_late_camera_steps(legacy)
    dataset = load_dataset(legacy)
    assert len(dataset) == 4
    for episode, samples, steps in zip(dataset, old_samples, old_steps, strict=False):
        assert episode.stream("wrist_ft").equals(samples)
        assert episode.steps().equals(steps)
    new_samples = dataset.episode("000003").stream("wrist_ft").drop_columns(["episode_id"])
    assert new_samples.equals(old_samples[1].drop_columns(["episode_id"]))  # same recipe, same rows
    assert spec_reader_episodes(legacy) == {f"{e:06d}": 15 for e in range(4)}
    assert validate(legacy, strict=False).ok


def test_the_legacy_fixture_is_what_the_earlier_writer_wrote() -> None:
    """Guards the fixture itself: a per-chunk stream table, no per-episode files, no layout key."""
    manifest_text = (LEGACY / layout.MANIFEST).read_text()
    assert layout.STREAM_FILES_KEY not in manifest_text
    assert sorted(p.name for p in (LEGACY / "data/chunk-000/streams").iterdir()) == ["wrist_ft.parquet"]


def _commit_one(root: str) -> None:
    with DatasetWriter(Path(root), manifest()) as writer:
        record(writer, steps=5)
        writer.end_episode()


_FORK_AFTER_A_COMMIT = """
import faulthandler, multiprocessing, sys
from dataset.test_append import _commit_one
_commit_one(sys.argv[1] + "/parent")
def child(root):
    faulthandler.dump_traceback_later(45, exit=True)  # (a hang prints where each thread waits)
    _commit_one(root)
process = multiprocessing.get_context("fork").Process(target=child, args=(sys.argv[1] + "/child",))
process.start()
process.join(timeout=60)
if process.is_alive():
    process.kill()
    process.join()
sys.exit(process.exitcode)
"""


def test_a_forked_child_commits_although_its_parent_has_committed_before(tmp_path: Path) -> None:
    """The commit's threads are kept for the process; a child forked after a commit has none of
    them and must make its own pool rather than wait on threads that do not exist. (In a fresh
    interpreter: the threads this test process has from other tests are not the product's.)"""
    run = subprocess.run(
        [sys.executable, "-c", _FORK_AFTER_A_COMMIT, str(tmp_path)],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(load_dataset(tmp_path / "parent")) == 1
    assert len(load_dataset(tmp_path / "child")) == 1


def test_a_failed_commit_to_an_earlier_dataset_cuts_back_its_stream_table_too(
    legacy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the per-chunk layout a commit appends to two tables: the stream's, then the steps'.
    A failure in the second leaves both as they were."""
    tables = [legacy / layout.stream_path(0, "wrist_ft"), legacy / STEPS]
    before = [t.read_bytes() for t in tables]
    copies = 0
    copy = parquet_append._copy

    def fail_the_second(source: BinaryIO, target: BinaryIO, count: int) -> None:
        nonlocal copies
        copies += 1
        if copies == 2:
            raise OSError(errno.EIO, "Input/output error")
        copy(source, target, count)

    with DatasetWriter(legacy) as writer:
        with monkeypatch.context() as patch:
            patch.setattr(parquet_append, "_copy", fail_the_second)
            record(writer)
            with pytest.raises(WriterError, match="Input/output error"):
                writer.end_episode()
        assert copies == 2
        assert [t.read_bytes() for t in tables] == before
    assert ortf(["recover", str(legacy)]) == 0
    assert spec_reader_episodes(legacy) == {f"{e:06d}": 15 for e in range(3)}
    assert load_dataset(legacy).episode("000002").stream("wrist_ft").num_rows == 467
    assert_only_late_camera_steps(legacy)
