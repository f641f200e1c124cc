"""Converting a recording again: a rerun skips what the dataset holds and what was deleted
from it (``--help`` says so, ``ortf info`` lists both), and ``--again`` converts the
named recordings anew, in place and with ``--jobs``, beside their older episodes, which
the summary names. (On Ray: test_fleet_ray.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from fleet.test_fleet import three_episode_recording
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.catalog import DELETED_ID_KEY, DELETED_SOURCES_KEY
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from support.fleet_data import Fleet, make_fleet

JOBS = {"in-place": ["--jobs", "1"], "jobs-2": ["--jobs", "2"]}
BETTER_TASK = "Pick up the peg, gently"  # what the better mapping changed
OBSERVED = ["action", "observation.state.joint_positions", "observation.state.ft_sensor", "timestamp"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet"), 2)


def convert(fleet: Fleet, output: Path, *args: str, inputs: list[str] | None = None) -> int:
    return bag2ortf([*(inputs or fleet.paths()), "-o", str(output), "--config", str(fleet.mapping), *args])


def json_run(fleet: Fleet, output: Path, capsys: pytest.CaptureFixture[str], *args: str, **kw: Any) -> Any:
    capsys.readouterr()
    assert convert(fleet, output, *args, "--json", **kw) == 0
    return json.loads(capsys.readouterr().out)


def info(output: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """``ortf info``'s lines from ``recordings`` on, and its JSON ``recordings``."""
    capsys.readouterr()
    assert ortf(["info", str(output)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ortf(["info", str(output), "--json"]) == 0
    recordings = json.loads(capsys.readouterr().out)["recordings"]
    starts = [n for n, line in enumerate(lines) if line.startswith("recordings")]
    return (lines[starts[0] :] if starts else []), recordings


def sources(output: Path) -> list[tuple[str, str, int]]:
    """The episode index's ids and sources, read with pyarrow: (id, fingerprint, place)."""
    table = pq.read_table(output / layout.EPISODES, columns=["episode_id", "source"])
    return [(i, s["fingerprint"], s["episode"]) for i, s in zip(*table.to_pydict().values(), strict=True)]


def delete(output: Path, *episode_ids: str) -> None:
    assert ortf(["episodes", "delete", str(output), *episode_ids, "--yes"]) == 0


def test_help_says_held_recordings_are_skipped_and_where_they_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        bag2ortf(["--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # (as wrapped to any terminal's width)
    assert "A recording the dataset already holds is skipped" in text
    assert "also one whose episodes were deleted (ortf episodes delete) is skipped" in text
    assert "`ortf info DATASET` lists the recordings a dataset holds" in text
    assert "--again convert the recordings even when the dataset holds them or their episodes were deleted" in text


def test_a_second_run_skips_the_recordings_and_ortf_info_lists_them(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "ds"
    assert convert(fleet, output) == 0
    before = {p: p.stat().st_mtime_ns for p in output.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert convert(fleet, output) == 0
    out = capsys.readouterr().out
    first, second = fleet.paths()
    assert f"{first}: skipped: already in the dataset (episode 000000)\n" in out
    assert f"{second}: skipped: already in the dataset (episode 000001)\n" in out
    assert f"(`ortf info {output}` lists the recordings it holds; --again converts them again)" in out
    assert {p: p.stat().st_mtime_ns for p in output.rglob("*") if p.is_file()} == before
    lines, recordings = info(output, capsys)
    assert lines == [
        "recordings  2 converted (ortf-bag2ortf skips them; --again converts them again)",
        f"  {first} -> 000000",
        f"  {second} -> 000001",
    ]
    fingerprints = [fingerprint for _, fingerprint, _ in sources(output)]
    assert recordings == [
        {"path": first, "fingerprint": fingerprints[0], "episodes": ["000000"], "deleted_episodes": []},
        {"path": second, "fingerprint": fingerprints[1], "episodes": ["000001"], "deleted_episodes": []},
    ]


@pytest.mark.parametrize("jobs", JOBS.values(), ids=JOBS.keys())
def test_again_adds_new_episodes_and_names_the_older_ones(
    fleet: Fleet, jobs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "ds"
    assert convert(fleet, output, *jobs) == 0
    summary = json_run(fleet, output, capsys, *jobs, "--again", "--task", BETTER_TASK)
    outcomes = summary["recordings"]
    assert [o["episodes"] for o in outcomes] == [["000002"], ["000003"]]
    assert [o["converted_again"] for o in outcomes] == [
        {"older_episodes": ["000000"], "deleted_episodes": []},
        {"older_episodes": ["000001"], "deleted_episodes": []},
    ]
    assert summary["totals"] == {"converted": 2, "skipped": 0, "failed": 0}

    dataset = load_dataset(output)
    assert [dataset.task(e.task_id).instruction for e in dataset.episodes] == [
        "Pick up the peg",
        "Pick up the peg",
        BETTER_TASK,
        BETTER_TASK,
    ]
    index = sources(output)
    assert [(i, place) for i, _, place in index] == [("000000", 0), ("000001", 0), ("000002", 0), ("000003", 0)]
    assert index[0][1] == index[2][1] != index[1][1] == index[3][1]  # each new one: the same recording
    for older, newer in (("000000", "000002"), ("000001", "000003")):  # the same data, converted twice
        assert dataset.episode(older).steps(OBSERVED).equals(dataset.episode(newer).steps(OBSERVED))
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)

    capsys.readouterr()
    first = fleet.paths()[0]
    assert convert(fleet, output, *jobs, "--again", "--task", BETTER_TASK, inputs=[first]) == 0
    out = capsys.readouterr().out
    assert f"{first} -> {output} episode(s) 000004: " in out
    assert (
        "  converted again (--again): older episode(s) 000000, 000002 came from the same recording and are kept "
        f"(`ortf episodes delete {output} 000000 000002` deletes them)\n"
    ) in out
    lines, _ = info(output, capsys)
    assert lines[1:] == [f"  {first} -> 000000, 000002, 000004", f"  {fleet.paths()[1]} -> 000001, 000003"]
    assert convert(fleet, output, *jobs) == 0  # and without --again: all held, skipped
    assert "2 recordings: 0 converted, 2 skipped" in capsys.readouterr().out
    assert len(load_dataset(output)) == 5


def test_again_with_a_mapping_that_splits_the_recording_otherwise(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One episode, then three of the same recording (a better mapping): the three are added,
    the one is named, and a rerun with either mapping skips the recording (its latest
    conversion is whole)."""
    bag, split = three_episode_recording(tmp_path)
    output = tmp_path / "ds"
    assert convert(fleet, output, inputs=[str(bag)]) == 0
    summary = json_run(fleet, output, capsys, "--again", "--config", str(split), inputs=[str(bag)])
    (outcome,) = summary["recordings"]
    assert outcome["episodes"] == ["000001", "000002", "000003"]
    assert outcome["converted_again"] == {"older_episodes": ["000000"], "deleted_episodes": []}
    assert [(i, place) for i, _, place in sources(output)] == [
        ("000000", 0),
        ("000001", 0),
        ("000002", 1),
        ("000003", 2),
    ]
    for mapping in (split, fleet.mapping):
        capsys.readouterr()
        assert bag2ortf([str(bag), "-o", str(output), "--config", str(mapping)]) == 0
        held = "already in the dataset (episode 000000, 000001, 000002, 000003)"
        assert f"{bag}: skipped: {held}" in capsys.readouterr().out
    assert len(load_dataset(output)) == 4


def test_a_deleted_recording_stays_skipped_and_ortf_info_lists_it(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "ds"
    assert convert(fleet, output) == 0
    delete(output, "000001")
    summary = json_run(fleet, output, capsys)
    first, second = fleet.paths()
    assert [o.get("skipped") for o in summary["recordings"]] == [
        "already in the dataset (episode 000000)",
        "already converted; episode 000001 deleted from the dataset (not converted again: --again converts it again)",
    ]
    assert [e.episode_id for e in load_dataset(output).episodes] == ["000000"]
    lines, recordings = info(output, capsys)
    assert lines == [
        "recordings  2 converted, 1 of them with every episode deleted "
        "(ortf-bag2ortf skips them; --again converts them again)",
        f"  {first} -> 000000",
        f"  {second} -> deleted: 000001",
    ]
    assert [(r["path"], r["episodes"], r["deleted_episodes"]) for r in recordings] == [
        (first, ["000000"], []),
        (second, [], ["000001"]),
    ]


@pytest.mark.parametrize("jobs", JOBS.values(), ids=JOBS.keys())
def test_again_brings_a_deleted_recording_back(
    fleet: Fleet, jobs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "ds"
    assert convert(fleet, output, *jobs) == 0
    delete(output, "000001")
    summary = json_run(fleet, output, capsys, *jobs, "--again", "--task", BETTER_TASK)
    assert [(o["episodes"], o["converted_again"]) for o in summary["recordings"]] == [
        (["000002"], {"older_episodes": ["000000"], "deleted_episodes": []}),
        (["000003"], {"older_episodes": [], "deleted_episodes": ["000001"]}),
    ]
    first, second = fleet.paths()
    assert [(i, place) for i, _, place in sources(output)] == [("000000", 0), ("000002", 0), ("000003", 0)]
    back = load_dataset(output).episode("000003")
    assert back.task.instruction == BETTER_TASK and back.steps(OBSERVED).num_rows == 15
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    lines, recordings = info(output, capsys)
    assert lines[1:] == [f"  {first} -> 000000, 000002", f"  {second} -> 000003; deleted: 000001"]
    assert [(r["episodes"], r["deleted_episodes"]) for r in recordings] == [
        (["000000", "000002"], []),
        (["000003"], ["000001"]),
    ]
    capsys.readouterr()
    assert convert(fleet, output, *jobs, inputs=[second]) == 0  # back, and held: skipped again
    assert f"{second}: skipped: already in the dataset (episode 000003; episode 000001 deleted)" in (
        capsys.readouterr().out
    )


def test_an_episode_deleted_before_ids_were_remembered_is_still_listed_and_skipped(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dataset whose deletions remember the source alone (as written before the id was kept)."""
    output = tmp_path / "ds"
    second = fleet.paths()[1]
    assert convert(fleet, output, inputs=[second]) == 0
    delete(output, "000000")
    manifest_path = output / layout.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest[DELETED_SOURCES_KEY]:
        del entry[DELETED_ID_KEY]
    manifest_path.write_text(json.dumps(manifest))
    summary = json_run(fleet, output, capsys, inputs=[second])
    assert summary["recordings"][0]["skipped"] == (
        "already converted; 1 episode(s) deleted from the dataset (not converted again: --again converts it again)"
    )
    lines, recordings = info(output, capsys)
    assert lines[1:] == [f"  {second} -> deleted: (id not remembered)"]
    assert recordings[0]["deleted_episodes"] == [None]
