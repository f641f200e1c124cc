"""``ortf.torch.OrtfDataset`` under PyTorch: samples as tensors of the stored values, the
same samples from DataLoader workers (fork and spawn, after the parent read some) as from
the loader's own process, the episode-aware sampler, and statistics as tensors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from ortf.convert import to_lerobot
from ortf.torch import EpisodeBatchSampler, OrtfDataset
from ortf_ros.io.object_storage import ObjectStorage
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.images import decode_frame_number
from support import lerobot_env
from support.s3_server import S3Server
from support.training_data import FPS, WRENCH, action, frame_number, write_training_dataset

STEPS = 16
DELTA = {"observation.images.cam_wrist": [-1 / FPS, 0.0], "action": [k / FPS for k in range(4)]}


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("torch")
    write_training_dataset(base / "a", episodes=3, steps=STEPS, chunk_size=2)
    write_training_dataset(base / "b", episodes=2, steps=STEPS, first=3)
    return base / "a", base / "b"


def test_a_sample_is_tensors_of_the_stored_values_with_windows_and_pads(roots: tuple[Path, Path]) -> None:
    dataset = OrtfDataset(roots[0], delta_timestamps=DELTA, native_windows={WRENCH: (-0.02, 0.0)})
    assert len(dataset) == 3 * STEPS
    item = dataset[STEPS + STEPS - 2]  # episode 1, two steps before its end
    assert item["action"].dtype == torch.float32 and item["action"].shape == (4, 8)
    torch.testing.assert_close(item["action"][:2], torch.from_numpy(np.stack([action(1, 14), action(1, 15)])))
    assert item["action_is_pad"].tolist() == [False, False, True, True]
    torch.testing.assert_close(item["action"][3], item["action"][1])  # the edge step repeated
    frames = item["observation.images.cam_wrist"]
    assert frames.dtype == torch.uint8 and frames.shape == (2, 3, 48, 64)
    assert [decode_frame_number(f.permute(1, 2, 0).numpy()) for f in frames] == [
        frame_number(1, s, 0) for s in (13, 14)
    ]
    assert item["observation.images.depth"].dtype == torch.uint16 and item["observation.images.depth"].shape == (
        1,
        48,
        64,
    )
    assert item[WRENCH].shape[1] == 6 and item[f"{WRENCH}_is_pad"].dtype == torch.bool
    assert item["task"] == "Open the drawer" and int(item["episode_index"]) == 1
    dataset.close()


def batches(loader: DataLoader[Any]) -> list[dict[str, Any]]:
    return list(loader)


def assert_same_batches(got: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> None:
    assert len(got) == len(wanted)
    for a, b in zip(got, wanted, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], torch.Tensor):
                assert torch.equal(a[key], b[key]), key
            else:
                assert a[key] == b[key], key


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_give_the_samples_the_loaders_own_process_gives(roots: tuple[Path, Path], context: str) -> None:
    dataset = OrtfDataset(list(roots), delta_timestamps=DELTA, native_windows={WRENCH: (-0.01, 0.0)})
    dataset[0]  # the parent has decoders open when the workers start: they must not use them
    alone = batches(DataLoader(dataset, batch_size=5, num_workers=0))
    workers = batches(DataLoader(dataset, batch_size=5, num_workers=2, multiprocessing_context=context, timeout=120))
    assert_same_batches(workers, alone)
    assert sum(len(b["action"]) for b in alone) == 5 * STEPS


def test_the_episode_sampler_gives_every_sample_once_each_as_indexed(roots: tuple[Path, Path]) -> None:
    dataset = OrtfDataset(list(roots), delta_timestamps=DELTA)
    sampler = EpisodeBatchSampler(dataset, 6, num_workers=2, seed=1)
    order = [i for batch in sampler for i in batch]
    assert sorted(order) == list(range(len(dataset)))
    loaded = batches(
        DataLoader(dataset, batch_sampler=sampler, num_workers=2, multiprocessing_context="fork", timeout=120)
    )
    assert len(loaded) == len(sampler)
    chosen = [list(b) for b in sampler]
    for batch, indices in zip(loaded, chosen, strict=True):
        for row, index in enumerate(indices):
            torch.testing.assert_close(batch["action"][row], dataset[index]["action"])
    sampler.set_epoch(1)
    assert [i for b in sampler for i in b] != order


def test_statistics_are_the_datasets_own_pooled_over_several(roots: tuple[Path, Path]) -> None:
    one = OrtfDataset(roots[0])
    stored = json.loads((roots[0] / "meta" / "stats.json").read_text())
    torch.testing.assert_close(one.stats["action"]["mean"], torch.tensor(stored["action"]["mean"], dtype=torch.float32))
    both = OrtfDataset(list(roots)).stats["action"]
    values = np.stack([action(e, s) for e in range(5) for s in range(STEPS)]).astype(np.float64)
    torch.testing.assert_close(both["mean"], torch.from_numpy(values.mean(0)).float(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(both["std"], torch.from_numpy(values.std(0)).float(), atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(both["max"], torch.from_numpy(values.max(0)).float())


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_loop() -> str:
    """The README's training loop, as written (the first Python block of "Train on it")."""
    section = README.read_text().split("## Train on it", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_training_loop_runs_as_written(tmp_path: Path) -> None:
    """On a dataset converted from a recording as `make demo` converts its own (the camera and
    action names the demo's mapping gives), in a fresh interpreter, workers forked."""
    bag = tmp_path / "take"
    write_teleop_bag(bag, "mcap", duration_s=2.0, width=64, height=48)
    (tmp_path / "demo-output").mkdir()
    converter = Path(sys.executable).parent / "ortf-bag2ortf"  # the console script, as a user runs it
    command = [str(converter), str(bag), "-o", "demo-output/dataset"]
    converted = subprocess.run(command, cwd=tmp_path, capture_output=True)
    assert converted.returncode == 0, converted.stderr[-3000:]
    code = readme_loop() + "\nprint('trained', float(loss))\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("trained ") and math.isfinite(float(done.stdout.split()[1]))


def test_a_policy_written_for_lerobots_loader_gets_the_same_windows(
    roots: tuple[Path, Path], tmp_path: Path, announce: Callable[[str], None]
) -> None:
    """The same ``delta_timestamps`` on the source and on its LeRobot export read by LeRobot
    0.4.4's own ``LeRobotDataset``: equal actions and pads, the same frames (within the
    export's codec, which keeps each frame's number)."""
    python = lerobot_env.lerobot_python(announce)
    export = tmp_path / "lerobot"
    to_lerobot(roots[0], export)
    delta = {"action": [-2 / FPS, 0.0, 1 / FPS, 3 / FPS], "observation.images.cam_wrist": [-1 / FPS, 0.0]}
    dump = tmp_path / "lerobot.npz"
    child = Path(__file__).resolve().parents[1] / "support" / "lerobot_windows_child.py"
    lerobot_env.run_in_lerobot(python, child, str(export), json.dumps(delta), str(dump), home=tmp_path / "hf")
    theirs = np.load(dump)
    ours = OrtfDataset(roots[0], delta_timestamps=delta)
    assert len(ours) == len(theirs["action"]) == 3 * STEPS
    for index in range(len(ours)):
        item = ours[index]
        assert int(item["episode_index"]) == theirs["episode_index"][index]
        np.testing.assert_array_equal(item["action"].numpy(), theirs["action"][index])
        for key in delta:
            np.testing.assert_array_equal(item[f"{key}_is_pad"].numpy(), theirs[f"{key}_is_pad"][index], err_msg=key)
        mine = [decode_frame_number(f.permute(1, 2, 0).numpy()) for f in item["observation.images.cam_wrist"]]
        assert mine == [decode_frame_number(f) for f in theirs["observation.images.cam_wrist"][index]]


def test_the_core_imports_no_torch_and_ortf_torch_does() -> None:
    probe = (
        "import sys, ortf, ortf_ros.train.samples, ortf_ros.cli.ortf; assert 'torch' not in sys.modules; "
        "import ortf.torch; assert 'torch' in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).returncode == 0


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    server = S3Server(tmp_path / "moto.log")
    try:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server
    finally:
        server.stop()


def test_a_dataset_in_object_storage_gives_the_local_samples(
    roots: tuple[Path, Path], s3: S3Server, tmp_path: Path
) -> None:
    """The same samples from ``s3://`` as from the directory, in forked workers, and a second
    epoch from the cache directory: no block fetched from the server."""
    url = s3.upload(roots[0], "datasets", "training/a")
    local = batches(DataLoader(OrtfDataset(roots[0], delta_timestamps=DELTA), batch_size=8))
    cache = tmp_path / "cache"
    remote = OrtfDataset(url, delta_timestamps=DELTA, native_windows={WRENCH: (-0.01, 0.0)}, cache_dir=cache)
    first = batches(DataLoader(remote, batch_size=8, num_workers=2, multiprocessing_context="fork", timeout=120))
    assert_same_batches([{k: b[k] for k in local[0]} for b in first], local)
    again = batches(DataLoader(remote, batch_size=8))  # this process's reader: only the cache to go on
    assert_same_batches(again, first)
    storage = remote.dataset(0).storage
    assert isinstance(storage, ObjectStorage)
    assert (storage.counts.requests, storage.counts.bytes) == (0, 0) and storage.counts.cached_blocks > 0
