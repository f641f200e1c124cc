"""The training reader's core, without torch: which steps are samples, what their windows
hold (checked against the step table, the decoded videos and the native stream), and the
episode-aware batch order. ``test/torch`` checks the PyTorch face on top of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pytest

from ortf_ros.dataset import reader as reader_module
from ortf_ros.dataset.edits import set_episode_labels
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.errors import ReaderError, UsageError
from ortf_ros.format import layout
from ortf_ros.synthetic.demo_arm import demo_depth
from ortf_ros.synthetic.images import decode_frame_number
from ortf_ros.train.batches import BatchOrder
from ortf_ros.train.index import EpisodeFilter, SampleIndex, build_index
from ortf_ros.train.row_groups import KEPT_GROUPS
from ortf_ros.train.samples import SampleReader, plan_samples
from support.training_data import FPS, WRENCH, WRENCH_HZ, action, frame_number, late_steps, write_training_dataset

STEPS = 20
LONG = 1100  # steps: two row groups of steps, 36 of force-torque samples
HISTORY = [-2 / FPS, -1 / FPS, 0.0]
AHEAD = [k / FPS for k in range(4)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("training") / "ds"
    write_training_dataset(path, episodes=3, steps=STEPS, chunk_size=2)  # two chunks
    return path


def reader_of(
    roots: list[Path],
    *,
    delta: dict[str, list[float]] | None = None,
    native: dict[str, tuple[float, ...]] | None = None,
    keep: EpisodeFilter | None = None,
    keys: list[str] | None = None,
) -> tuple[SampleIndex, SampleReader, list[Dataset]]:
    datasets = [load_dataset(r) for r in roots]
    names = [str(r) for r in roots]
    plans = plan_samples(datasets, names, delta or {}, native or {}, keys)
    return build_index(datasets, names, keep or EpisodeFilter()), SampleReader(names, plans), datasets


def test_windows_hold_the_step_tables_values_and_pad_past_both_ends_of_the_episode(root: Path) -> None:
    index, reader, _ = reader_of([root], delta={"action": HISTORY + AHEAD[1:], "observation.images.cam_wrist": HISTORY})
    assert len(index) == 3 * STEPS
    offsets = np.array([-2, -1, 0, 1, 2, 3])
    for number in range(len(index)):
        samples, step = index.locate(number)
        item = reader.sample(samples, step)
        wanted = step + offsets
        np.testing.assert_array_equal(item["action_is_pad"], (wanted < 0) | (wanted >= STEPS))
        edge = np.clip(wanted, 0, STEPS - 1)  # a pad repeats the edge step, as LeRobot's
        np.testing.assert_array_equal(item["action"], np.stack([action(samples.position, s) for s in edge]))
        frames = item["observation.images.cam_wrist"]
        assert frames.shape == (3, 3, 48, 64) and frames.dtype == np.uint8  # (T, C, H, W)
        seen = [decode_frame_number(f.transpose(1, 2, 0)) for f in frames]
        assert seen == [frame_number(samples.position, s, 0) for s in edge[:3]]
        np.testing.assert_array_equal(item["observation.images.cam_wrist_is_pad"], wanted[:3] < 0)
        # the other cameras at the step: the frame the step table names, depth exact in mm
        assert decode_frame_number(item["observation.images.cam_overhead"].transpose(1, 2, 0)) == frame_number(
            samples.position, step, 1
        )
        depth = item["observation.images.depth"]
        assert depth.dtype == np.uint16 and depth.shape == (1, 48, 64)
        np.testing.assert_array_equal(depth[0], demo_depth(step + samples.position, 64, 48))
        assert item["task"] and item["episode_index"] == samples.position and item["dataset_index"] == 0
        assert item["step_index"] == samples.position * STEPS + step or item["step_index"] == step
    reader.close()


def decoded(path: Path) -> list[np.ndarray]:
    """Every frame of a video, as PyAV decodes it from the start (no seeking)."""
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def test_frames_are_the_decoded_videos_own(root: Path) -> None:
    """Pixel for pixel what a plain decode of the episode's video gives at the index the step
    table names, also where the reader seeks (random order) and continues (a window)."""
    index, reader, datasets = reader_of([root], delta={"observation.images.cam_overhead": [-2 / FPS, 0.0]})
    order = np.random.default_rng(5).permutation(len(index))
    videos: dict[int, list[np.ndarray]] = {}
    for number in order.tolist():
        samples, step = index.locate(number)
        if samples.position not in videos:
            record = datasets[0].episodes[samples.position]
            videos[samples.position] = decoded(root / str(record.video_files["cam_overhead"]))
        named = datasets[0].episode(samples.position).array(layout.image_column("cam_overhead"))
        item = reader.sample(samples, step)
        steps = np.clip([step - 2, step], 0, STEPS - 1)
        for frame, at in zip(item["observation.images.cam_overhead"], steps, strict=True):
            np.testing.assert_array_equal(frame.transpose(1, 2, 0), videos[samples.position][int(named[at])])
    reader.close()


def test_a_native_window_holds_every_sample_of_the_stream_in_its_span(root: Path) -> None:
    index, reader, datasets = reader_of([root], native={WRENCH: (-0.05, 0.0)})
    stream = datasets[0].episode(1).stream(WRENCH, ["timestamp", "force"])
    times = stream["timestamp"].to_numpy()
    for step in (0, 1, 10, STEPS - 1):
        samples, _ = index.locate(STEPS + step)
        item = reader.sample(samples, step)
        t = step / FPS
        inside = np.arange(max(0, int(np.ceil((t - 0.05) * WRENCH_HZ - 1e-6))), int(np.floor(t * WRENCH_HZ + 1e-6)) + 1)
        count = len(inside)
        np.testing.assert_allclose(times[inside], inside / WRENCH_HZ)
        capacity = int(np.ceil(0.05 * WRENCH_HZ * 1.5)) + 2
        assert item[WRENCH].shape == (capacity, 6) and item[f"{WRENCH}_is_pad"].sum() == capacity - count
        np.testing.assert_array_equal(item[WRENCH][:count, 0], inside.astype(np.float32))  # force x = sample number
        np.testing.assert_allclose(item[f"{WRENCH}.timestamp"][:count], times[inside])
        assert not item[WRENCH][count:].any()
    reader.close()


def test_filters_drop_failed_and_flagged_episodes_and_badly_aligned_steps(root: Path, tmp_path: Path) -> None:
    assert [e.position for e in reader_of([root], keep=EpisodeFilter(skip_failed=True))[0].episodes] == [0, 1]
    index = reader_of([root], keep=EpisodeFilter(max_alignment_ms={"cam_wrist": 20.0}))[0]
    for episode in index.episodes:
        assert episode.steps.tolist() == [s for s in range(STEPS) if not late_steps(s)]
    assert len(reader_of([root], keep=EpisodeFilter(max_alignment_ms=20.0))[0]) == len(index)
    assert [e.position for e in reader_of([root], keep=EpisodeFilter(episodes=["000001", 2]))[0].episodes] == [1, 2]
    with pytest.raises(UsageError, match=r"episodes: \['7'\] not found"):
        reader_of([root], keep=EpisodeFilter(episodes=[7]))
    with pytest.raises(UsageError, match="aligns no stream"):
        reader_of([root], keep=EpisodeFilter(max_alignment_ms={"lidar": 5.0}))
    flagged = tmp_path / "flagged"
    shutil.copytree(root, flagged)
    set_episode_labels(flagged, "000000", review_flag=True)
    assert [e.position for e in reader_of([flagged], keep=EpisodeFilter(skip_flagged=True))[0].episodes] == [1, 2]


@pytest.mark.parametrize(
    ("delta", "native", "message"),
    [
        ({"action": [0.01]}, {}, r"delta_timestamps\['action'\]: 0.01 s is not a whole number of steps"),
        ({"observation.state.nope": [0.0]}, {}, "has no step column or camera 'observation.state.nope'"),
        ({"action": []}, {}, "expected a non-empty list of seconds"),
        ({}, {"lidar": (-0.1, 0.0)}, "has no native stream 'lidar'"),
        ({}, {WRENCH: (0.1, 0.0)}, "expected finite start <= end"),
    ],
)
def test_a_window_the_dataset_cannot_give_is_one_line(
    root: Path, delta: dict[str, list[float]], native: dict[str, tuple[float, ...]], message: str
) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        reader_of([root], delta=delta, native=native)
    assert "\n" not in str(caught.value)


def test_two_datasets_of_several_chunks_are_read_one_after_the_other(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write_training_dataset(other, episodes=2, steps=STEPS, first=3)
    index, reader, _ = reader_of([root, other], delta={"action": [0.0, 1 / FPS]})
    assert len(index) == 5 * STEPS
    keys = None
    for number in (0, 2 * STEPS + 5, 3 * STEPS, 5 * STEPS - 1):
        samples, step = index.locate(number)
        item = reader.sample(samples, step)
        episode = samples.position + (3 if samples.source == 1 else 0)
        np.testing.assert_array_equal(item["action"][0], action(episode, step))
        assert item["dataset_index"] == samples.source
        assert keys is None or set(item) == keys
        keys = set(item)
    reader.close()


def test_a_missing_or_corrupt_video_names_the_episode_and_camera(root: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(root, broken)
    records = load_dataset(broken).episodes
    (broken / str(records[0].video_files["cam_wrist"])).unlink()
    corrupt = broken / str(records[1].video_files["cam_wrist"])
    corrupt.write_bytes(corrupt.read_bytes()[: corrupt.stat().st_size // 3])  # cut short
    index, reader, _ = reader_of([broken])
    with pytest.raises(ReaderError, match=r"episode 000000, camera cam_wrist: .*missing"):
        reader.sample(*index.locate(3))

    def every_step_of_the_cut_episode() -> None:
        for step in range(STEPS):  # up to the frames past the cut
            reader.sample(*index.locate(STEPS + step))

    with pytest.raises(ReaderError, match=r"episode 000001, camera cam_wrist: "):
        every_step_of_the_cut_episode()
    item = reader.sample(*index.locate(2 * STEPS))  # the others are read as before
    assert decode_frame_number(item["observation.images.cam_wrist"].transpose(1, 2, 0)) == frame_number(2, 0, 0)


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_batches_cover_every_sample_once_and_keep_each_worker_on_its_own_episodes(workers: int) -> None:
    sizes = [7, 30, 12, 1, 25, 9, 40]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    episodes = [np.arange(s, s + n) for s, n in zip(starts, sizes, strict=True)]
    owner = np.repeat(np.arange(len(sizes)), sizes)
    order = BatchOrder(8, workers, shuffle=True, seed=3)
    batches = list(order.batches(episodes, epoch=1))
    assert sorted(i for b in batches for i in b) == list(range(sum(sizes)))
    assert len(batches) == order.count(sizes, epoch=1)
    lanes = max(workers, 1)
    mine: list[set[int]] = [set() for _ in range(lanes)]
    for number, batch in enumerate(batches[: lanes * 3]):  # while every worker has batches left
        mine[number % lanes].update(owner[batch].tolist())
    for a in range(lanes):
        for b in range(a + 1, lanes):
            assert not mine[a] & mine[b]  # no episode read by two workers
    assert batches == list(order.batches(episodes, epoch=1))
    assert batches != list(order.batches(episodes, epoch=2))
    flat = [i for b in BatchOrder(8, workers, shuffle=False).batches(episodes) for i in b]
    assert sorted(flat) == list(range(sum(sizes)))


def test_steps_read_are_the_step_tables_own(root: Path) -> None:
    index, reader, datasets = reader_of([root])
    table = datasets[0].episode(2).steps(["timestamp", layout.alignment_column("cam_wrist")])
    samples, _ = index.locate(2 * STEPS)
    for step in range(STEPS):
        item = reader.sample(samples, step)
        assert item["timestamp"] == table["timestamp"][step].as_py()
        assert item[layout.alignment_column("cam_wrist")] == table[layout.alignment_column("cam_wrist")][step].as_py()
    reader.close()


def test_a_long_episode_is_read_a_row_group_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups of 1024 rows (the staging log's batches): a sample reads the groups its
    windows cross, with values right across their boundaries, and a reader keeps a few."""
    root = tmp_path / "long"
    write_training_dataset(root, episodes=1, steps=LONG, row_group_steps=1024)
    reads: list[tuple[str, int]] = []
    original = reader_module._EpisodeRows.read_group

    def counted(self: reader_module._EpisodeRows, group: int, columns: list[str]) -> pa.Table:
        reads.append((self.relative, group))
        return original(self, group, columns)

    monkeypatch.setattr(reader_module._EpisodeRows, "read_group", counted)
    index, reader, datasets = reader_of(
        [root], delta={"action": [-2 / FPS, 0.0, 5 / FPS]}, native={WRENCH: (-0.01, 0.0)}
    )
    stream = datasets[0].episode(0).stream(WRENCH, ["timestamp"])
    episode = datasets[0].episode(0)
    assert datasets[0].rows_index(episode.steps_file).metadata.num_row_groups == 2
    assert datasets[0].rows_index(episode.stream_file(WRENCH)).metadata.num_row_groups > 30
    for step in (0, 1021, 1023, 1024, 700, LONG - 1):
        reads.clear()
        item = reader.sample(*index.locate(step))
        wanted = np.clip(step + np.array([-2, 0, 5]), 0, LONG - 1)
        np.testing.assert_array_equal(item["action"], np.stack([action(0, s) for s in wanted]))
        t = step / FPS
        times = stream["timestamp"].to_numpy()
        inside = times[(times >= t - 0.01 - 1e-9) & (times <= t + 1e-9)]
        np.testing.assert_allclose(item[f"{WRENCH}.timestamp"][: len(inside)], inside)
        assert len(reads) <= 4, reads  # the groups around the step, not the episode's
        opened = next(iter(reader._open.values()))
        assert len(opened.steps._kept) <= KEPT_GROUPS
    reader.close()


def test_keys_keep_only_the_columns_and_cameras_named(root: Path) -> None:
    index, reader, _ = reader_of([root], keys=["action", "observation.images.depth"], native={WRENCH: (-0.01, 0.0)})
    item = reader.sample(*index.locate(5))
    assert set(item) == {
        "action",
        "observation.images.depth",
        WRENCH,
        f"{WRENCH}.timestamp",
        f"{WRENCH}_is_pad",
        "task",
        "dataset_index",
        "episode_index",
    }
    with pytest.raises(UsageError, match=r"keys: \['observation.images.nope'\] not in every dataset"):
        reader_of([root], keys=["observation.images.nope"])
    reader.close()
