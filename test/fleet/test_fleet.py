"""``ortf-bag2ortf`` over many recordings, in place and with ``--jobs``: directories and
``--inputs-from`` as inputs, a rerun that converts only what the dataset lacks (also a
recording cut off between its episodes), a bad recording that fails alone, the same
recording given twice, a path that now holds another recording. (On Ray: test_fleet_ray.)"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cli.test_bag2ortf import RESOURCES, mapping_for
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.edits import delete_episodes
from ortf_ros.dataset.importing import import_episode
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.run_lock import run_lock, run_lock_path
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import UsageError
from ortf_ros.fleet.inputs import recordings
from ortf_ros.format import layout
from ortf_ros.pipeline.mapping import EpisodeSplit, write_mapping
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.scene import START_NS
from support.fleet_data import Fleet, converted_in_place, dataset_digest, make_fleet

JOBS = {"in-place": ["--jobs", "1"], "jobs-2": ["--jobs", "2"]}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet"), 3)


@pytest.fixture(scope="module")
def reference(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return converted_in_place(fleet, tmp_path_factory.mktemp("reference") / "ds")


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_directories_are_searched_and_inputs_from_lists_recordings(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    closed = touch(root / "2026-11-20" / "run_a" / "metadata.yaml").parent  # a rosbag2 directory
    touch(closed / "run_a_0.mcap")
    unclosed = touch(root / "2026-11-20" / "run_b" / "run_b_0.mcap").parent  # killed: no metadata.yaml
    touch(unclosed / "run_b_1.mcap")
    ros1 = touch(root / "2026-11-21" / "arm.bag")
    flat = [touch(root / "2026-11-21" / "loose" / name) for name in ("x.mcap", "y.db3.zstd")]  # not run_b's naming
    touch(root / "2026-11-21" / "notes.txt")
    touch(root / ".ortf-bag2ortf-abc" / "part-000000-x" / "dataset" / "z.mcap")  # hidden: scratch
    assert recordings([str(root)]) == [closed, unclosed, ros1, *flat]
    assert recordings([str(closed)]) == [closed]  # a recording given as itself
    assert recordings([str(ros1), str(root / "2026-11-21")]) == [ros1, *flat]  # each once

    listing = tmp_path / "lists" / "inputs.txt"
    listing.parent.mkdir()
    listing.write_text(f"# this week's\n\n{ros1}\n../fleet/2026-11-20/run_a\n")  # relative to the file
    assert [p.resolve() for p in recordings([], str(listing))] == [ros1, closed]
    listing.write_text(f"{ros1}\n{tmp_path / 'gone.mcap'}\n")
    with pytest.raises(UsageError, match=r"inputs.txt:2: .*gone.mcap: no such file or directory"):
        recordings([], str(listing))
    with pytest.raises(UsageError, match="no recording in this directory"):
        recordings([str(touch(tmp_path / "empty" / "readme.md").parent)])
    (root / "2026-11-21" / "loop").symlink_to(root)  # a link back up: searched once
    assert recordings([str(root)]) == [closed, unclosed, ros1, *flat]
    listing.write_bytes(b"\xff\xfe" + str(ros1).encode())
    with pytest.raises(UsageError, match=r"inputs.txt: not UTF-8 text"):
        recordings([], str(listing))


@pytest.mark.parametrize("jobs", JOBS.values(), ids=JOBS.keys())
def test_a_rerun_converts_only_what_the_dataset_lacks(
    fleet: Fleet, reference: dict[str, object], jobs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "ds"
    common = ["-o", str(output), "--config", str(fleet.mapping), *jobs]
    assert bag2ortf([fleet.paths()[0], *common]) == 0
    capsys.readouterr()
    assert bag2ortf([*fleet.paths(), *common, "--json"]) == 0  # one was there; two are new
    summary = json.loads(capsys.readouterr().out)
    outcomes = summary["recordings"]
    assert outcomes[0]["skipped"] == "already in the dataset (episode 000000)"
    assert [o["episodes"] for o in outcomes] == [["000000"], ["000001"], ["000002"]]
    assert [list(o["accounting"]) for o in outcomes[1:]] == [["000001"], ["000002"]]  # (the dataset's ids)
    assert summary["totals"] == {"converted": 2, "skipped": 1, "failed": 0}
    assert dataset_digest(output) == reference
    before = {p: p.stat().st_mtime_ns for p in output.rglob("*") if p.is_file()}
    assert bag2ortf([*fleet.paths(), *common]) == 0  # nothing left to do: nothing written
    assert "3 recordings: 0 converted, 3 skipped" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in output.rglob("*") if p.is_file()} == before
    assert not list(tmp_path.glob(".ortf-bag2ortf-*"))


def three_episode_recording(tmp_path: Path) -> tuple[Path, Path]:
    """A recording and a mapping that splits it into three episodes."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=1.5)
    mapping = tmp_path / "mapping.yaml"
    split = EpisodeSplit(mode="ranges", ranges=((0.0, 0.4), (0.5, 0.9), (1.0, 1.4)))
    write_mapping(replace(mapping_for(bag.path), episodes=split), mapping)
    return bag.path, mapping


def test_a_recording_cut_off_between_its_episodes_gets_the_rest(tmp_path: Path) -> None:
    """A run killed after the first of a recording's three episodes was committed: the rerun
    converts the recording again and imports the two that are missing."""
    bag, mapping = three_episode_recording(tmp_path)
    whole = tmp_path / "whole"
    assert bag2ortf([str(bag), "-o", str(whole), "--config", str(mapping)]) == 0
    assert [e.source.episodes for e in load_dataset(whole).episodes if e.source] == [3, 3, 3]
    cut = tmp_path / "cut"  # as a direct conversion leaves it: the count not written yet
    converted = load_dataset(whole)
    with DatasetWriter(cut, replace(converted.manifest, dataset_id="", created_at=None)) as writer:
        source = converted.episode(0).record.source
        assert source is not None
        record = replace(converted.episode(0).record, source=replace(source, episodes=None))
        import_episode(writer, Episode(converted, record))
    assert bag2ortf([str(bag), "-o", str(cut), "--config", str(mapping)]) == 0
    assert dataset_digest(cut)["episodes"] == dataset_digest(whole)["episodes"]


def test_an_episode_deleted_after_review_is_not_converted_again(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A person deleted a bad episode; the day's recordings converted again leave it deleted,
    also when it was one of a recording's several episodes."""
    output = tmp_path / "ds"
    common = ["-o", str(output), "--config", str(fleet.mapping)]
    assert bag2ortf([*fleet.paths(), *common]) == 0
    delete_episodes(output, ["000001"])
    capsys.readouterr()
    assert bag2ortf([*fleet.paths(), *common, "--json"]) == 0
    outcomes = json.loads(capsys.readouterr().out)["recordings"]
    assert outcomes[1]["skipped"] == (
        "already converted; episode 000001 deleted from the dataset (not converted again: --again converts it again)"
    )
    assert [e.episode_id for e in load_dataset(output).episodes] == ["000000", "000002"]

    bag, mapping = three_episode_recording(tmp_path)
    three = tmp_path / "three"
    assert bag2ortf([str(bag), "-o", str(three), "--config", str(mapping)]) == 0
    delete_episodes(three, ["000001"])
    assert bag2ortf([str(bag), "-o", str(three), "--config", str(mapping), "--jobs", "2"]) == 0
    assert [e.episode_id for e in load_dataset(three).episodes] == ["000000", "000002"]
    assert validate(three, strict=True).ok


@pytest.mark.parametrize("jobs", JOBS.values(), ids=JOBS.keys())
def test_a_bad_recording_fails_alone_and_the_run_exits_1(
    fleet: Fleet, reference: dict[str, object], jobs: list[str], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    bad = RESOURCES / "cruise-automation__rosbag.js/fixtures/example-lz4.bag"  # no joint state
    garbage = tmp_path / "garbage.mcap"
    garbage.write_bytes(b"\x89MCAP0\r\n" + b"\0" * 100)
    first, second, third = fleet.paths()
    output = tmp_path / "ds"
    args = [first, str(bad), second, str(garbage), third, "-o", str(output), "--config", str(fleet.mapping), *jobs]
    assert bag2ortf(args) == 1
    out, err = capfd.readouterr()
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("ortf-bag2ortf: ") for line in lines), err
    assert str(bad) in lines[0] and "topic" in lines[0] and str(garbage) in lines[1]
    assert "5 recordings: 3 converted, 0 skipped (in the dataset already), 2 failed" in out
    assert dataset_digest(output) == reference  # the good ones, in order
    assert bag2ortf(args) == 1  # run again: the good ones are there, the bad ones fail again
    assert "5 recordings: 0 converted, 3 skipped (in the dataset already), 2 failed" in capfd.readouterr().out


def test_nothing_converted_leaves_no_dataset(tmp_path: Path) -> None:
    bad = RESOURCES / "cruise-automation__rosbag.js/fixtures/example-lz4.bag"
    assert bag2ortf([str(bad), str(bad.parent / "example-bz2.bag"), "-o", str(tmp_path / "ds")]) == 1
    assert not (tmp_path / "ds").exists()


def test_the_same_recording_twice_is_converted_once(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = fleet.recordings[1].path  # a ROS 1 bag
    copy = tmp_path / "copy_of_it.bag"
    shutil.copyfile(original, copy)  # another name, another time: the same recording
    output = tmp_path / "ds"
    assert bag2ortf([str(original), str(copy), "-o", str(output), "--config", str(fleet.mapping)]) == 0
    assert f"{copy}: skipped: the same recording as {original} (converted once)" in capsys.readouterr().out
    assert len(load_dataset(output)) == 1
    assert bag2ortf([str(copy), "-o", str(output), "--config", str(fleet.mapping)]) == 0
    assert f"{copy}: skipped: already in the dataset (episode 000000)" in capsys.readouterr().out


def test_a_path_that_now_holds_another_recording_is_converted_and_said_so(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "today.bag"
    shutil.copyfile(fleet.recordings[1].path, path)
    output = tmp_path / "ds"
    assert bag2ortf([str(path), "-o", str(output), "--config", str(fleet.mapping)]) == 0
    path.unlink()
    write_teleop_bag(path, "ros1", duration_s=0.5, start_ns=START_NS + 3600 * 10**9)  # recorded over
    capsys.readouterr()
    assert bag2ortf([str(path), "-o", str(output), "--config", str(fleet.mapping)]) == 0
    assert "other content was converted from this path before; converted as new" in capsys.readouterr().out
    assert len(load_dataset(output)) == 2


def test_a_dataset_without_sources_is_valid_and_a_rerun_converts_into_it(fleet: Fleet, tmp_path: Path) -> None:
    """Another writer's dataset (or one made before episodes said their source)."""
    output = tmp_path / "ds"
    assert bag2ortf([fleet.paths()[0], "-o", str(output), "--config", str(fleet.mapping)]) == 0
    index = output / layout.EPISODES
    pq.write_table(pq.read_table(index).drop_columns(["source"]), index)
    assert validate(output, strict=True).ok
    assert bag2ortf([fleet.paths()[1], "-o", str(output), "--config", str(fleet.mapping)]) == 0
    assert validate(output, strict=True).ok
    episodes = load_dataset(output).episodes
    assert [e.source is None for e in episodes] == [True, False]


def test_a_second_run_into_the_same_dataset_stops_at_once(
    fleet: Fleet, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """(An hourly job still running an hour later would otherwise convert the same
    recordings twice.) Its --json document still ends, saying the run stopped."""
    output = tmp_path / "ds"
    args = [*fleet.paths(), "-o", str(output), "--config", str(fleet.mapping), "--json"]
    with run_lock(output):  # the first run's
        assert bag2ortf(args) == 1
    out, err = capfd.readouterr()
    assert err == f"ortf-bag2ortf: {output}: another ortf-bag2ortf run or an edit is using this dataset\n"
    assert json.loads(out) == {"output": str(output), "recordings": [], "stopped": True}
    assert not output.exists() and not run_lock_path(output).exists()
    assert bag2ortf(args[:-1]) == 0  # once it has ended
    assert not run_lock_path(output).exists()
