"""The children of ``bench_training.py``: one DataLoader workload in this process, its
figures as JSON on the last line of stdout.

Each runs in the venv of its loader (``--loader``), so torch's build and the loader's own
dependencies are the ones a trainer would have:

- ``ortf``: ``OrtfDataset`` with the workload's ``DataLoader(batch_size=32, shuffle=True,
  num_workers=2)``; ``ortf-episodes``: the same dataset through its ``EpisodeBatchSampler``;
  ``floor``: ``FloorDataset`` below, which decodes exactly the frames the same samples need with
  PyAV and does nothing else. These three run in the torch venv (scripts/torch-env.sh).
- ``lerobot``: LeRobot's own ``LeRobotDataset`` on the LeRobot export, in LeRobot's venv
  (../shared/lerobot-env/setup.sh), offline.

``--s3`` serves the dataset from moto's S3 server (a process of its own, on 127.0.0.1) and
reads it by URL. The shuffled order comes from one seeded generator, so every loader draws
the same samples. Checked by mypy in the torch venv (``make lint-torch``), not the main one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import psutil
import torch
from av.container import InputContainer
from torch.utils.data import DataLoader, Dataset

BATCH_SIZE = 32
WORKERS = 2
SEED = 0
S3_BUCKET = "ortf-bench"
S3_KEYS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


# -- the floor: PyAV decoding the frames the samples need, nothing else ----------------------


@dataclass(frozen=True)
class Window:
    """One camera's frames of one sample: the video and the frame indices, oldest first."""

    video: str
    frames: tuple[int, ...]


def planar_rgb(frame: av.VideoFrame) -> np.ndarray:
    """A frame as (3, H, W) uint8, the cheapest way PyAV gives it: swscale's planar G, B, R
    planes copied in R, G, B order (no transposing copy of every pixel)."""
    planes = frame.reformat(format="gbrp", threads=1).planes
    g, b, r = (np.frombuffer(memoryview(p), np.uint8).reshape(p.height, p.line_size)[:, : p.width] for p in planes)
    return np.stack([r, g, b])


class FloorDataset(Dataset[dict[str, torch.Tensor]]):
    """Per sample and camera: seek to the keyframe at or before the oldest frame the window
    needs, decode forward to the newest, keep those frames as uint8 (T, 3, H, W). The frame
    each step names is read from the step table before timing (``Window``); containers are
    opened in each worker on first use and kept. What a loader does beyond this (the step
    table's columns, actions, masks, its own bookkeeping) is its cost over the floor."""

    def __init__(self, root: str, deltas: dict[str, list[float]], fps: float) -> None:
        from ortf_ros.dataset.reader import load_dataset  # the torch venv has the project
        from ortf_ros.format import layout

        self.samples: list[dict[str, Window]] = []
        dataset = load_dataset(root)
        cameras = {
            key: key.removeprefix("observation.images.") for key in deltas if key.startswith("observation.images.")
        }
        for episode in dataset:
            columns = {key: episode.array(layout.image_column(camera)) for key, camera in cameras.items()}
            steps = len(next(iter(columns.values())))
            for step in range(steps):
                sample = {}
                for key, camera in cameras.items():
                    offsets = [round(delta * fps) for delta in deltas[key]]
                    frames = tuple(int(columns[key][min(max(step + k, 0), steps - 1)]) for k in offsets)
                    sample[key] = Window(str(episode.video_path(camera)), frames)
                self.samples.append(sample)
        self._containers: dict[str, InputContainer] = {}

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {key: torch.from_numpy(self._decode(window)) for key, window in self.samples[index].items()}

    def _decode(self, window: Window) -> np.ndarray:
        container = self._containers.get(window.video)
        if container is None:
            opened = av.open(window.video)
            assert isinstance(opened, InputContainer)
            container = self._containers[window.video] = opened
        stream = container.streams.video[0]
        rate, time_base, start = float(stream.average_rate or 0), float(stream.time_base or 0), stream.start_time or 0
        first, last = min(window.frames), max(window.frames)
        container.seek(start + round(first / rate / time_base), stream=stream, backward=True, any_frame=False)
        wanted: dict[int, np.ndarray] = {}
        for frame in container.decode(stream):
            index = round(((frame.pts or 0) - start) * time_base * rate)
            if index >= first:
                wanted[index] = planar_rgb(frame)
            if index >= last:
                break
        return np.stack([wanted[i] for i in window.frames])


# -- the loaders ------------------------------------------------------------------------------


def make_loader(kind: str, root: str, deltas: dict[str, list[float]], fps: float) -> DataLoader[Any]:
    generator = torch.Generator().manual_seed(SEED)
    dataset: Dataset[Any]
    if kind == "floor":
        dataset = FloorDataset(root, deltas, fps)
    elif kind == "lerobot":
        from lerobot.datasets.lerobot_dataset import LeRobotDataset  # type: ignore[import-not-found]  # its venv only

        dataset = LeRobotDataset("local/ortf-export", root=root, delta_timestamps=deltas)
    else:
        from ortf.torch import EpisodeBatchSampler, OrtfDataset

        ortf = OrtfDataset(root, delta_timestamps=deltas)
        if kind == "ortf-episodes":
            sampler = EpisodeBatchSampler(ortf, batch_size=BATCH_SIZE, num_workers=WORKERS, shuffle=True, seed=SEED)
            return DataLoader(ortf, batch_sampler=sampler, num_workers=WORKERS)
        dataset = ortf
    return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=WORKERS, generator=generator)


class WorkerMemory:
    """The peak RSS and PSS of each DataLoader worker (this process's children but the
    ``ignored`` ones, e.g. the S3 server), sampled in a thread: RSS every 50 ms (one read of
    /proc/PID/statm), PSS every 0.5 s (smaps_rollup, which costs the kernel more)."""

    def __init__(self, ignored: Iterable[int] = ()) -> None:
        self._ignored = set(ignored)
        self.rss: dict[int, int] = {}
        self.pss: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        this = psutil.Process()
        tick = 0
        while not self._stop.wait(0.05):
            tick += 1
            for child in this.children():
                if child.pid in self._ignored:
                    continue
                with contextlib.suppress(psutil.Error):
                    self.rss[child.pid] = max(self.rss.get(child.pid, 0), child.memory_info().rss)
                    if tick % 10 == 1:
                        self.pss[child.pid] = max(self.pss.get(child.pid, 0), child.memory_full_info().pss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def batch_size(batch: Any) -> int:
    """Samples in a collated batch: the first dimension of its first tensor."""
    tensors = [value for value in batch.values() if isinstance(value, torch.Tensor)]
    return int(tensors[0].shape[0])


def measure(loader: DataLoader[Any], batches: int, ignored: Iterable[int]) -> dict[str, Any]:
    memory = WorkerMemory(ignored)
    try:
        start = time.perf_counter()
        iterator: Iterator[Any] = iter(loader)
        first = next(iterator)
        first_batch_s = time.perf_counter() - start
        keys = sorted(first)
        timed_from = time.perf_counter()
        samples = 0
        for _ in range(batches):
            batch = next(iterator, None)
            if batch is None:
                break
            samples += batch_size(batch)
        seconds = time.perf_counter() - timed_from
        del iterator  # stops the workers
    finally:
        memory.stop()
    return {
        "first_batch_s": first_batch_s,
        "samples": samples,
        "seconds": seconds,
        "samples_per_s": samples / seconds,
        "worker_rss": sorted(memory.rss.values()),
        "worker_pss": sorted(memory.pss.values()),
        "batch_size": batch_size(first),
        "keys": keys,
    }


# -- S3: moto's server on loopback -------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def s3_served(root: Path) -> Iterator[tuple[str, int]]:
    """``root`` uploaded to a bucket of moto's S3 server (a process of its own on 127.0.0.1,
    stopped after); yields the dataset's URL and the server's pid. The standard variables
    (keys, region, ``AWS_ENDPOINT_URL``) are set here, so the workers inherit them."""
    import boto3  # moto[server] brings it; the torch venv has both

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"moto's S3 server did not answer on {endpoint}") from None
                time.sleep(0.1)
        os.environ.update(S3_KEYS, AWS_ENDPOINT_URL=endpoint)
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket=S3_BUCKET)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            client.upload_file(str(path), S3_BUCKET, f"{root.name}/{path.relative_to(root)}")
        yield f"s3://{S3_BUCKET}/{root.name}", server.pid
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--loader", choices=("floor", "ortf", "ortf-episodes", "lerobot"), required=True)
    parser.add_argument("--root", type=Path, required=True, help="the dataset (the LeRobot export for lerobot)")
    parser.add_argument("--deltas", required=True, help="delta_timestamps as JSON")
    parser.add_argument("--fps", type=float, required=True)
    parser.add_argument("--batches", type=int, required=True, help="batches timed after the first")
    parser.add_argument("--s3", action="store_true", help="read the dataset from moto's S3 server")
    args = parser.parse_args()
    deltas: dict[str, list[float]] = json.loads(args.deltas)
    torch.manual_seed(SEED)
    with contextlib.ExitStack() as stack:
        root, ignored = str(args.root), []
        if args.s3:
            root, server_pid = stack.enter_context(s3_served(args.root))
            ignored.append(server_pid)
        start = time.perf_counter()
        loader = make_loader(args.loader, root, deltas, args.fps)
        open_s = time.perf_counter() - start
        dataset = loader.dataset
        figures = measure(loader, args.batches, ignored)
    figures |= {"open_s": open_s, "length": len(dataset) if isinstance(dataset, Sized) else None}
    figures["torch"] = torch.__version__
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
