"""Datasets read from object storage: a dataset written by the project, uploaded to moto's S3
server on loopback, read through ``load_dataset("s3://...")`` and compared with the local read;
ranges, the cache directory, fork and spawn workers, and the one-line failures."""

from __future__ import annotations

import hashlib
import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pytest

import ortf
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ReaderError
from ortf_ros.format import layout
from ortf_ros.format.native_streams import NativeStream
from ortf_ros.format.spaces import StateComponent
from ortf_ros.io.object_storage import ObjectStorage
from ortf_ros.synthetic.demo_arm import DEPTH_CAMERA, demo_action, demo_depth, demo_manifest, demo_rgb, demo_state
from support.cli_errors import one_line_error
from support.s3_server import S3Server, free_port

WIDTH, HEIGHT, FPS, STEPS, FT_HZ = 320, 240, 30, 45, 1000
STREAM = "wrist_ft"
RAW = 128  # the stream's raw column: a table of megabytes, of which reading "force" takes little


def write_dataset(root: Path) -> None:
    """Two episodes of two colour cameras, lossless depth and a 1 kHz stream."""
    manifest = replace(
        demo_manifest(WIDTH, HEIGHT, FPS, depth=True),
        native_streams={
            STREAM: NativeStream(
                columns={"force": StateComponent(3, "newtons"), "raw": StateComponent(RAW, "counts")},
                rate_hz=FT_HZ,
                source="/ft",
            )
        },
    )
    cameras = [key for key in manifest.cameras if not manifest.cameras[key].is_depth]
    with DatasetWriter(root, manifest) as writer:
        for episode in range(2):
            writer.begin_episode(f"task {episode}")
            sample = -1
            for step in range(STEPS):
                t = step / FPS
                while (sample + 1) / FT_HZ <= t:
                    sample += 1
                    force = np.array([episode, sample, np.sin(sample / 50)], np.float32)
                    raw = np.random.default_rng([episode, sample]).random(RAW, np.float32)
                    writer.add_sample(STREAM, sample / FT_HZ, {"force": force, "raw": raw}, stamp_ns=sample * 10**6)
                images = {camera: demo_rgb(n, step + 7 * episode, WIDTH, HEIGHT) for n, camera in enumerate(cameras)}
                images[cameras[0]] = noise(episode, step)  # a video of megabytes: the ranges read are seen
                images[DEPTH_CAMERA[0]] = demo_depth(step, WIDTH, HEIGHT)
                writer.add_step(
                    t,
                    demo_state(episode, step),
                    demo_action(episode, step),
                    images,
                    samples={STREAM: sample},
                )
            writer.end_episode(success=episode == 0)


def noise(episode: int, step: int) -> np.ndarray:
    """A frame H.264 cannot shrink much (tens of kilobytes)."""
    return np.random.default_rng([episode, step]).integers(0, 256, (HEIGHT, WIDTH, 3), np.uint8)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("local") / "ds"
    write_dataset(root)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    running = S3Server(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def url(server: S3Server, local: Path) -> str:
    return server.upload(local, "datasets", "teleop/v1")


@pytest.fixture
def s3_env(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The reader finds the server and its credentials in the environment, as a user's would be."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    return server


def files_of(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def frames_digest(dataset: Dataset) -> str:
    """Every frame of every camera of every episode, and every step and stream row, hashed."""
    digest = hashlib.sha256()
    for episode in dataset:
        with episode:
            for batch in episode.steps().to_batches():
                digest.update(batch.serialize().to_pybytes())
            digest.update(episode.stream(STREAM).to_batches()[0].serialize().to_pybytes())
            for camera in dataset.manifest.cameras:
                for index in range(episode.record.length):
                    digest.update(episode.frame(camera, index).tobytes())
    return digest.hexdigest()


def test_everything_read_from_s3_equals_the_local_read(s3_env: S3Server, local: Path, url: str) -> None:
    remote, here = ortf.load_dataset(url), load_dataset(local)
    assert remote.location == url
    assert remote.manifest == here.manifest
    assert remote.episodes == here.episodes and len(remote) == 2
    assert remote.tasks == here.tasks and remote.stats == here.stats and remote.stats
    for relative in files_of(local):  # byte for byte, whatever the file
        assert remote.storage.read_bytes(relative) == (local / relative).read_bytes(), relative
    for far, near in zip(remote, here, strict=True):
        assert far.steps().equals(near.steps())
        assert pa.Table.from_batches(list(far.step_batches())).equals(near.steps())
        assert far.stream(STREAM).equals(near.stream(STREAM)) and near.stream(STREAM).num_rows > 1000
        assert pa.Table.from_batches(list(far.stream_batches(STREAM, ["force"]))).equals(near.stream(STREAM, ["force"]))
        np.testing.assert_array_equal(far.array("action"), near.array("action"))
        for camera in here.manifest.cameras:
            for index in range(near.record.length):
                expected = near.frame(camera, index)
                assert expected.dtype == (np.uint16 if camera == DEPTH_CAMERA[0] else np.uint8)
                np.testing.assert_array_equal(far.frame(camera, index), expected, err_msg=f"{camera} {index}")
        far.close()
        near.close()
    assert isinstance(remote.storage, ObjectStorage) and remote.storage.counts.requests > 0


def test_a_frame_and_a_column_are_read_by_ranges(s3_env: S3Server, local: Path, url: str) -> None:
    storage = ObjectStorage(url, block_bytes=64 << 10)
    dataset = Dataset(storage)
    episode = dataset.episode(1)
    camera = next(key for key, sensor in dataset.manifest.cameras.items() if not sensor.is_depth)  # the noisy one
    video = local / episode.video_file(camera)
    assert video.stat().st_size > 1 << 20
    before = storage.counts.bytes
    frame = episode.frame(camera, STEPS - 5)
    np.testing.assert_array_equal(frame, load_dataset(local).episode(1).frame(camera, STEPS - 5))
    fetched = storage.counts.bytes - before
    assert 0 < fetched < video.stat().st_size / 2, (fetched, video.stat().st_size)

    table = local / episode.stream_file(STREAM)
    assert table.stat().st_size > 512 << 10
    before = storage.counts.bytes
    assert episode.stream(STREAM, ["force"]).equals(load_dataset(local).episode(1).stream(STREAM, ["force"]))
    fetched = storage.counts.bytes - before  # the footer and the chunks of three columns
    assert 0 < fetched < table.stat().st_size / 3, (fetched, table.stat().st_size)


def test_a_second_pass_reads_the_cache_directory_and_a_replaced_object_anew(
    s3_env: S3Server, local: Path, url: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = load_dataset(url, cache_dir=cache)
    digest = frames_digest(first)
    assert isinstance(first.storage, ObjectStorage) and first.storage.counts.requests > 0
    second = load_dataset(url, cache_dir=cache)
    assert frames_digest(second) == digest == frames_digest(load_dataset(local))
    assert isinstance(second.storage, ObjectStorage)
    counts = second.storage.counts  # only the objects' sizes and times were asked (HEAD), no block
    assert (counts.requests, counts.bytes) == (0, 0) and counts.cached_blocks > 0

    s3 = s3_env.filesystem()
    stats_key = f"{url.removeprefix('s3://')}/{layout.STATS}"
    original = (local / layout.STATS).read_bytes()
    try:
        with s3.open_output_stream(stats_key) as out:
            out.write(b'{"replaced": true}')
        assert load_dataset(url, cache_dir=cache).stats == {"replaced": True}
    finally:
        with s3.open_output_stream(stats_key) as out:
            out.write(original)
    assert load_dataset(url, cache_dir=cache).stats == load_dataset(local).stats


def read_in_child(dataset: Dataset | str, queue: multiprocessing.Queue[str]) -> None:
    """A DataLoader worker's work: the whole dataset, hashed (given the dataset or its URL)."""
    queue.put(frames_digest(dataset if isinstance(dataset, Dataset) else load_dataset(dataset)))


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_worker_processes_read_the_same_bytes(s3_env: S3Server, url: str, start: Literal["fork", "spawn"]) -> None:
    dataset = load_dataset(url)
    expected = frames_digest(dataset)  # the parent has its client, tables and videos open
    dataset.episode(0).frame(next(iter(dataset.manifest.cameras)), 3)
    context = multiprocessing.get_context("fork") if start == "fork" else multiprocessing.get_context("spawn")
    queue = context.Queue()
    given: list[Dataset | str] = [dataset, url] if start == "spawn" else [dataset]
    for what in given:
        child = context.Process(target=read_in_child, args=(what, queue))
        child.start()
        try:
            assert queue.get(timeout=120) == expected
        finally:
            child.join(timeout=60)
            if child.is_alive():
                child.kill()
        assert child.exitcode == 0
    assert frames_digest(dataset) == expected  # and the parent still reads after its child


def test_a_missing_bucket_or_dataset_is_one_line_naming_the_url(s3_env: S3Server, url: str) -> None:
    with pytest.raises(ReaderError, match=r"^s3://nowhere/x: no bucket 'nowhere' at http://127\.0\.0\.1:\d+$"):
        load_dataset("s3://nowhere/x")
    with pytest.raises(ReaderError, match=r"^s3://datasets/teleop/v2: no ORTF dataset there \(meta/manifest.json"):
        load_dataset("s3://datasets/teleop/v2")
    with pytest.raises(ReaderError, match="^gs://datasets/x: not an object storage URL"):
        load_dataset("gs://datasets/x")


def test_an_unreachable_endpoint_fails_in_seconds(s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(ReaderError) as raised:
        load_dataset("s3://datasets/teleop/v1")
    assert time.monotonic() - started < 15
    line = str(raised.value)
    assert line.startswith("s3://datasets/teleop/v1/meta/manifest.json: cannot reach the endpoint http://127.0.0.1:")
    assert "\n" not in line


def test_commands_refuse_urls_in_one_line(capsys: pytest.CaptureFixture[str], local: Path) -> None:
    line = one_line_error(capsys, "export lerobot", local, "s3://datasets/out", code=2)
    assert "s3://datasets/out: a URL; expected" in line
    assert not Path("s3:").exists()
    assert "s3://datasets/teleop/v1: a URL" in one_line_error(capsys, "info", "s3://datasets/teleop/v1", code=2)


def test_a_wrong_secret_is_refused_in_one_line(s3_env: S3Server, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Last in the module: moto checks signatures from here on."""
    s3_env.require_signatures()
    assert load_dataset(url).episode(0).steps(["timestamp"]).num_rows == STEPS  # the right key still reads
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(ReaderError) as raised:
        load_dataset(url)
    assert str(raised.value).startswith(f"{url}/meta/manifest.json: access refused (see AWS_ACCESS_KEY_ID")
