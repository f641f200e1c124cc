"""Native-rate side tables and per-step alignment: every sample kept with its stamps,
steps pointing into it, alignment errors in columns and summarised in the manifest."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.validation import RULES, validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import WriterError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.native_streams import Alignment, NativeStream
from ortf_ros.format.spaces import StateComponent
from ortf_ros.synthetic.demo_arm import demo_action, demo_manifest, demo_rgb, demo_state

WRENCH_HZ, STEP_HZ, STEPS = 1000, 30, 15


def manifest(tolerance_ms: float = 20.0, own_ms: dict[str, float] | None = None) -> Manifest:
    """The dataset's sync tolerance ``tolerance_ms`` and, by stream, ``own_ms`` (``alignment.tolerance_ms``)."""
    base = demo_manifest(64, 48, depth=False)
    return replace(
        base,
        native_streams={
            "wrist_ft": NativeStream(
                columns={"force": StateComponent(3, "newtons"), "torque": StateComponent(3, "newton_meters")},
                rate_hz=WRENCH_HZ,
                source="/ft_sensor/wrench",
            )
        },
        alignment=Alignment(streams=("cam_wrist", "wrist_ft"), tolerance_ms=own_ms or {}),
        sync_tolerance_ms=tolerance_ms,
    )


def wrench(i: int) -> dict[str, np.ndarray]:
    t = i / WRENCH_HZ
    return {"force": np.array([np.sin(t), 2 * t, -1.5], np.float32), "torque": np.array([0.1, t, 0.0], np.float32)}


def camera_alignment(step: int) -> float:
    return 50.0 if step % 5 == 4 else 2.0 * (step % 3)  # every fifth step is late


def record(writer: DatasetWriter, steps: int = STEPS) -> None:
    writer.begin_episode("Hold the peg")
    sample = -1
    for step in range(steps):
        t = step / STEP_HZ
        while (sample + 1) / WRENCH_HZ <= t:
            sample += 1
            writer.add_sample("wrist_ft", sample / WRENCH_HZ, wrench(sample), stamp_ns=sample * 10**6, receive_ns=7)
        images = {cam: demo_rgb(n, step, 64, 48) for n, cam in enumerate(("cam_wrist", "cam_overhead"))}
        writer.add_step(
            t,
            demo_state(0, step),
            demo_action(0, step),
            images,
            samples={"wrist_ft": sample},
            alignment_ms={"cam_wrist": camera_alignment(step), "wrist_ft": (t - sample / WRENCH_HZ) * 1000},
        )


def assert_only_late_camera_steps(root: Path) -> None:
    """Valid, with the late camera steps reported (a warning, so --strict fails on it)."""
    report = validate(root)
    assert report.ok
    assert {(f.rule, f.field) for f in report.findings} == {
        ("alignment.tolerance", layout.alignment_column("cam_wrist"))
    }, [f.line() for f in report.findings]
    assert not validate(root, strict=True).ok


def test_every_native_sample_is_kept_and_steps_point_into_it(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds", manifest()) as writer:
        record(writer)
        writer.end_episode(success=True)
    episode = load_dataset(tmp_path / "ds").episode(0)
    samples = episode.stream("wrist_ft")
    count = int((STEPS - 1) / STEP_HZ * WRENCH_HZ) + 1
    assert samples.num_rows == count
    force = samples["force"].combine_chunks().flatten().to_numpy().reshape(-1, 3)
    np.testing.assert_array_equal(force, np.stack([wrench(i)["force"] for i in range(count)]))
    assert samples["stamp_ns"].to_pylist()[:3] == [0, 10**6, 2 * 10**6]
    np.testing.assert_allclose(samples["timestamp"].to_numpy(), np.arange(count) / WRENCH_HZ, atol=1e-9)
    used = episode.array(layout.stream_index_column("wrist_ft"))
    step_times = episode.array("timestamp")
    # the sample a step used is the latest one at or before the step time
    np.testing.assert_array_equal(used, np.floor(step_times * WRENCH_HZ + 1e-6).astype(np.int64))
    assert_only_late_camera_steps(tmp_path / "ds")
    file = tmp_path / "ds" / layout.episode_stream_path(0, "wrist_ft", 0)
    per_episode = duckdb.execute(f"SELECT count(*) FROM '{file}' WHERE episode_id = '000000'").fetchall()
    assert per_episode == [(count,)]


def test_alignment_is_reported_per_step_and_summarised(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    for _ in range(2):  # two writers: the summary is merged across appends
        with DatasetWriter(root, manifest()) as writer:
            record(writer)
            writer.end_episode(success=True)
    episode = load_dataset(root).episode(1)
    expected = np.array([camera_alignment(s) for s in range(STEPS)], np.float32)
    np.testing.assert_array_equal(episode.array(layout.alignment_column("cam_wrist")), expected)
    summary = json.loads((root / layout.MANIFEST).read_text())["alignment"]["summary"]
    assert summary["cam_wrist"]["steps"] == 2 * STEPS
    assert summary["cam_wrist"]["max_ms"] == 50.0
    assert summary["cam_wrist"]["steps_outside_tolerance"] == 2 * (STEPS // 5)
    assert summary["cam_wrist"]["p95_ms"] == 50.0  # 6 of 30 values are 50
    assert summary["wrist_ft"]["steps_outside_tolerance"] == 0
    assert summary["wrist_ft"]["max_ms"] < 1.0
    stats = json.loads((root / layout.STATS).read_text())
    assert stats[layout.alignment_column("cam_wrist")]["above_threshold"] == [6]


def test_each_stream_is_judged_by_its_own_tolerance(tmp_path: Path) -> None:
    """The camera's own 1 ms counts its 2 and 4 ms steps too; the dataset's 60 ms (the
    loosest, the spec's) lets its 50 ms steps pass no other stream's own."""
    root = tmp_path / "ds"
    with DatasetWriter(root, manifest(60.0, {"cam_wrist": 1.0, "wrist_ft": 0.5})) as writer:
        record(writer)
        writer.end_episode(success=True)
    written = json.loads((root / layout.MANIFEST).read_text())
    assert written["sync_tolerance_ms"] == 60.0
    assert written["alignment"]["tolerance_ms"] == {"cam_wrist": 1.0, "wrist_ft": 0.5}
    assert load_dataset(root).manifest.stream_tolerance_ms("cam_wrist") == 1.0
    late_camera = sum(1 for step in range(STEPS) if camera_alignment(step) > 1.0)
    summary = written["alignment"]["summary"]
    assert summary["cam_wrist"]["steps_outside_tolerance"] == late_camera == 11
    ft_errors = load_dataset(root).episode(0).array(layout.alignment_column("wrist_ft"))
    assert 0 < summary["wrist_ft"]["steps_outside_tolerance"] == int((ft_errors > 0.5).sum()) < STEPS
    found = {f.field: f.message for f in validate(root).findings if f.rule == "alignment.tolerance"}
    assert found[layout.alignment_column("cam_wrist")].startswith(f"{late_camera} step(s) used a sample of 'cam_wrist'")
    assert "further than its 1 ms sync tolerance (worst 50.0 ms)" in found[layout.alignment_column("cam_wrist")]


def test_bad_stream_input_is_refused(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds", manifest()) as writer:
        writer.begin_episode("Hold the peg")
        with pytest.raises(WriterError, match="unknown stream 'imu'"):
            writer.add_sample("imu", 0.0, wrench(0))
        with pytest.raises(WriterError, match=r"unknown column\(s\) \[\] , missing \['torque'\]".replace(" ,", ",")):
            writer.add_sample("wrist_ft", 0.0, {"force": np.zeros(3)})
        with pytest.raises(WriterError, match=r"'wrist_ft' force: expected 3 values, got shape \(1,\)"):
            writer.add_sample("wrist_ft", 0.0, {"force": np.zeros(1), "torque": np.zeros(3)})
        for bad in (np.nan, np.inf, 1e39):  # 1e39 is beyond float32, as stored
            with pytest.raises(WriterError, match=r"stream 'wrist_ft': values must be finite, got force \["):
                writer.add_sample("wrist_ft", 0.0, {"force": np.array([bad, 0, 0]), "torque": np.zeros(3)})
        writer.add_sample("wrist_ft", 0.5, wrench(0))
        with pytest.raises(WriterError, match="must be finite and not before the previous"):
            writer.add_sample("wrist_ft", 0.4, wrench(1))
        images = {"cam_wrist": demo_rgb(0, 0, 64, 48), "cam_overhead": demo_rgb(1, 0, 64, 48)}
        with pytest.raises(WriterError, match="stream 'wrist_ft' has no sample 3"):
            writer.add_step(0.5, demo_state(0, 0), demo_action(0, 0), images, samples={"wrist_ft": 3})
        with pytest.raises(WriterError, match="alignment of 'cam_wrist' must be >= 0 ms"):
            writer.add_step(0.5, demo_state(0, 0), demo_action(0, 0), images, alignment_ms={"cam_wrist": -1.0})
        writer.add_step(0.5, demo_state(0, 0), demo_action(0, 0), images, samples={"wrist_ft": 0})
        record = writer.end_episode()
    assert record.length == 1
    episode = load_dataset(tmp_path / "ds").episode(0)
    steps = episode.steps([layout.alignment_column("cam_wrist"), "timestamp"])
    assert steps.column(0).to_pylist() == [None]  # not reported, not invented
    assert steps.column(1).to_pylist() == [0.0]  # refused samples did not start the episode's clock
    assert episode.stream("wrist_ft")["sample_index"].to_pylist() == [0]


def test_interrupted_recording_keeps_its_samples(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    writer = DatasetWriter(root, manifest()).open()
    record(writer, steps=10)
    writer.close()  # the episode stays staged, as after a crash
    (result,) = recover(root)
    assert (result.action, result.steps) == ("recovered", 10)
    samples = load_dataset(root).episode(0).stream("wrist_ft")
    assert samples.num_rows == int(9 / STEP_HZ * WRENCH_HZ) + 1
    assert_only_late_camera_steps(root)


# -- validator rules on streams and alignment (one breakage each) ------------------------------------

Breaker = Callable[[Path], None]


def rewrite(relative: str, change: Callable[[pa.Table], pa.Table]) -> Breaker:
    def breaker(root: Path) -> None:
        path = root / relative
        pq.write_table(change(pq.read_table(path)), path)

    return breaker


def set_column(name: str, values: Callable[[pa.Table], list[Any]]) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        index = table.schema.get_field_index(name)
        return table.set_column(
            index, table.schema.field(index), pa.array(values(table), table.schema.field(index).type)
        )

    return change


def edit_manifest(change: Callable[[dict[str, Any]], None]) -> Breaker:
    def breaker(root: Path) -> None:
        data = json.loads((root / layout.MANIFEST).read_text())
        change(data)
        (root / layout.MANIFEST).write_text(json.dumps(data))

    return breaker


def garble(path: Path) -> None:
    path.write_bytes(b"PAR1 not really")


FT_TABLE = layout.episode_stream_path(0, "wrist_ft", 0)


def copy_as_episode(root: Path, index: int) -> None:
    """The stream file of episode 0 copied under another episode's name, in no index."""
    shutil.copy(root / FT_TABLE, root / layout.episode_stream_path(0, "wrist_ft", index))


STEPS_TABLE = layout.steps_path(0)
FT_INDEX = layout.stream_index_column("wrist_ft")
EPISODES_TABLE = layout.EPISODES


def doctor_native_samples(table: pa.Table) -> pa.Table:
    """One force-torque sample more than the table holds, counted where the files are checked."""
    rows = table.to_pylist()
    account = next(a for a in rows[0]["accounting"] if a["stream"] == "wrist_ft")
    account["native_samples"] += 1
    return pa.Table.from_pylist(rows, schema=table.schema)


STREAM_BREAKAGES: list[tuple[str, Breaker]] = [
    ("manifest.stream_names", edit_manifest(lambda m: m["alignment"]["streams"].append("cam/wrist"))),
    ("manifest.stream_tolerance", edit_manifest(lambda m: m["alignment"].update(tolerance_ms={"cam_wrist": 25.0}))),
    ("manifest.stream_tolerance", edit_manifest(lambda m: m["alignment"].update(tolerance_ms={"lidar": 5.0}))),
    ("streams.missing", lambda root: (root / FT_TABLE).unlink()),
    ("streams.unreadable", lambda root: garble(root / FT_TABLE)),
    ("streams.sample_index", rewrite(FT_TABLE, set_column("sample_index", lambda t: [0] * t.num_rows))),
    ("streams.timestamp", rewrite(FT_TABLE, set_column("timestamp", lambda t: [1.0 - i for i in range(t.num_rows)]))),
    ("streams.orphan", rewrite(FT_TABLE, set_column("episode_id", lambda t: ["999999"] * t.num_rows))),
    ("streams.orphan", lambda root: copy_as_episode(root, 9)),
    ("manifest.stream_files", edit_manifest(lambda m: m.update({layout.STREAM_FILES_KEY: "per-day"}))),
    ("steps.stream_index", rewrite(STEPS_TABLE, set_column(FT_INDEX, lambda t: [10**6] * t.num_rows))),
    ("alignment.tolerance", lambda root: None),  # the recorded late camera steps
    ("episodes.accounting_files", rewrite(EPISODES_TABLE, doctor_native_samples)),
]  # fmt: skip


@pytest.fixture(scope="module")
def stream_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("streams") / "ds"
    with DatasetWriter(root, manifest()) as writer:
        record(writer)
        writer.end_episode(success=True)
    return root


@pytest.mark.parametrize(("rule", "breaker"), STREAM_BREAKAGES, ids=[rule for rule, _ in STREAM_BREAKAGES])
def test_stream_rule(stream_dataset: Path, tmp_path: Path, rule: str, breaker: Breaker) -> None:
    root = tmp_path / "ds"
    shutil.copytree(stream_dataset, root)
    breaker(root)
    report = validate(root)
    found = {f.rule: f.severity for f in report.findings}
    assert found.get(rule) == RULES[rule][0], [f.line() for f in report.findings]


def test_samples_after_the_last_step_are_kept(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds", manifest()) as writer:
        record(writer, steps=3)
        for extra in range(1, 6):  # buffered, used by no step: end_episode still writes them
            writer.add_sample("wrist_ft", 2 / STEP_HZ + extra / WRENCH_HZ, wrench(0))
        writer.end_episode()
    samples = load_dataset(tmp_path / "ds").episode(0).stream("wrist_ft")
    assert samples.num_rows == int(2 / STEP_HZ * WRENCH_HZ) + 1 + 5
    assert samples["sample_index"].to_pylist() == list(range(samples.num_rows))


def test_samples_added_in_batches_equal_samples_added_one_by_one(tmp_path: Path) -> None:
    count = 2500  # more than a staging batch holds
    times = np.arange(count) / WRENCH_HZ
    rows = [wrench(i) for i in range(count)]
    stamps = [i * 10**6 if i % 7 else None for i in range(count)]
    with DatasetWriter(tmp_path / "one", manifest()) as one, DatasetWriter(tmp_path / "batch", manifest()) as batch:
        for writer in (one, batch):
            writer.begin_episode("Hold the peg")
        for i in range(count):
            assert one.add_sample("wrist_ft", times[i], rows[i], stamp_ns=stamps[i], receive_ns=i) == i
        first = 0
        for size in (1, 700, 1500, 299):
            part = slice(first, first + size)
            columns = {name: np.stack([r[name] for r in rows[part]]) for name in ("force", "torque")}
            index = batch.add_samples(
                "wrist_ft", times[part], columns, stamp_ns=stamps[part], receive_ns=list(range(first, first + size))
            )
            assert index == first
            first += size
        for writer in (one, batch):
            writer.add_step(times[-1], demo_state(0, 0), demo_action(0, 0), _frames(), samples={"wrist_ft": count - 1})
            writer.end_episode()
    tables = [load_dataset(tmp_path / name).episode(0).stream("wrist_ft") for name in ("one", "batch")]
    assert tables[0].num_rows == count
    assert tables[0].equals(tables[1])


def test_a_bad_sample_refuses_its_whole_batch(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds", manifest()) as writer:
        writer.begin_episode("Hold the peg")
        force = np.zeros((3, 3))
        force[2, 1] = np.nan
        with pytest.raises(WriterError, match=r"stream 'wrist_ft': values must be finite, got force \[0.0, nan"):
            writer.add_samples("wrist_ft", [0.5, 0.6, 0.7], {"force": force, "torque": np.zeros((3, 3))})
        with pytest.raises(
            WriterError, match=r"sample timestamp 0.55 must be finite and not before the previous \(0.6"
        ):
            writer.add_samples("wrist_ft", [0.5, 0.6, 0.55], {"force": np.zeros((3, 3)), "torque": np.zeros((3, 3))})
        with pytest.raises(WriterError, match=r"'wrist_ft' torque: expected 3 values, got shape \(2,\)"):
            writer.add_samples("wrist_ft", [0.5, 0.6], {"force": np.zeros((2, 3)), "torque": np.zeros((2, 2))})
        with pytest.raises(WriterError, match="2 timestamps, 1 stamp_ns"):
            writer.add_samples(
                "wrist_ft", [0.5, 0.6], {"force": np.zeros((2, 3)), "torque": np.zeros((2, 3))}, stamp_ns=[1]
            )
        assert writer.add_samples("wrist_ft", [0.8], {"force": np.ones((1, 3)), "torque": np.ones((1, 3))}) == 0
        writer.add_step(0.8, demo_state(0, 0), demo_action(0, 0), _frames(), samples={"wrist_ft": 0})
        writer.end_episode()
    samples = load_dataset(tmp_path / "ds").episode(0).stream("wrist_ft")
    assert samples["timestamp"].to_pylist() == [0.0]  # refused batches did not start the clock


def _frames() -> dict[str, np.ndarray]:
    return {cam: demo_rgb(n, 0, 64, 48) for n, cam in enumerate(("cam_wrist", "cam_overhead"))}


def test_row_groups_end_at_a_size_in_bytes_as_well_as_in_rows(tmp_path: Path) -> None:
    """A commit writes a row group per ``row_group_steps`` rows or ``row_group_bytes`` bytes,
    whichever comes first: a wide stream's blocks are held in memory by size, not count."""
    count = 5000
    groups = {}
    for name, config in (("rows", WriterConfig()), ("bytes", WriterConfig(row_group_bytes=100_000))):
        with DatasetWriter(tmp_path / name, manifest(), config=config) as writer:
            writer.begin_episode("Hold the peg")
            for i in range(count):
                writer.add_sample("wrist_ft", i / WRENCH_HZ, wrench(i))
            writer.add_step(count / WRENCH_HZ, demo_state(0, 0), demo_action(0, 0), _frames(), samples={"wrist_ft": 0})
            writer.end_episode()
        metadata = pq.ParquetFile(tmp_path / name / layout.episode_stream_path(0, "wrist_ft", 0)).metadata
        groups[name] = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    assert groups["rows"] == [count]
    # The staged rows come in batches of 1,024 or so, of about 60 bytes a row: two make a block.
    assert len(groups["bytes"]) > 2 and sum(groups["bytes"]) == count and max(groups["bytes"]) < 2500
    tables = [load_dataset(tmp_path / name).episode(0).stream("wrist_ft") for name in ("rows", "bytes")]
    assert tables[0].equals(tables[1])
