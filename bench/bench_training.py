"""Training from ORTF: ``OrtfDataset`` against LeRobot's own loader and the decode floor.

The issue's workload (36, section 3), one run on this machine, CPU only:

- Content: a 60 s dataset with two 640x480 cameras at 30 fps, JointState at 500 Hz and
  force-torque at 1 kHz: ``bench_bag2ortf.py``'s bag with JPEG cameras converted by
  ``ortf-bag2ortf``'s path, and that dataset exported with ``ortf export lerobot``. Both are
  cached in ``.cache/bench/training-<bag>/`` (keyed like the bags), so a second run starts at
  once.
- Workload: ``DataLoader(batch_size=32, shuffle=True, num_workers=2)`` over 2 frames of history
  per camera (``[-1/fps, 0]``) and 16 actions ahead (``[k/fps for k in range(16)]``); the same
  ``delta_timestamps`` and the same seeded order in every loader.
- Loaders, each in a child process in its own venv (``bench/torch_loaders.py``): ``OrtfDataset``
  with the plain shuffle and with its ``EpisodeBatchSampler``, in the torch venv
  (scripts/torch-env.sh); ``LeRobotDataset`` on the export, in LeRobot's venv
  (../shared/lerobot-env/setup.sh, offline); and the floor, a Dataset that only decodes the
  frames each sample needs with PyAV (seek to the keyframe, decode forward), in the same
  DataLoader setup in the torch venv.
- Figures, each loader's best of ``--repeat`` runs (default 2, interleaved: other load on
  the machine only slows a run): samples/s over ``--batches`` batches after the first, the
  first batch's latency (workers started to first batch; opening the dataset is shown
  apart), the peak RSS of each worker (sampled every 50 ms), and the ratios the issue sets
  targets for: samples/s at least 1.5x LeRobot's, cost per sample at most 1.25x the
  floor's, RSS per worker under 1 GB.
- Section 2: the same ``OrtfDataset`` reading the dataset from S3 (moto's server on
  127.0.0.1) against local disk. Skipped with one line when the reader cannot open the URL.

Run from the repository root::

    .venv/bin/python bench/bench_training.py            # 60 s dataset, 40 batches timed
    .venv/bin/python bench/bench_training.py --quick    # 10 s dataset, 10 batches

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
from bench_bag2ortf import DEFAULT_CACHE, REPO, BagSpec, convert, ensure_bag, generator_hash, prune_cache
from measure import MB, Row, print_table

from ortf_ros.convert.lerobot_columns import camera_key, dataset_fps
from ortf_ros.convert.lerobot_common import colour_cameras
from ortf_ros.convert.lerobot_export import to_lerobot
from ortf_ros.dataset.reader import load_dataset

CHILD = Path(__file__).resolve().parent / "torch_loaders.py"
LEROBOT_SETUP = REPO.parent / "shared" / "lerobot-env" / "setup.sh"
HISTORY_FRAMES = 2
ACTIONS_AHEAD = 16
SPEED_TARGET = 1.5  # x LeRobot's samples/s
FLOOR_TARGET = 1.25  # x the floor's cost per sample
RSS_TARGET_MB = 1024.0
LOADERS = {
    "floor": "floor: PyAV decodes the frames each sample needs",
    "ortf": "OrtfDataset",
    "ortf-episodes": "OrtfDataset + EpisodeBatchSampler",
    "lerobot": "LeRobotDataset on the LeRobot export",
}


# -- the content ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Content:
    dataset: Path
    lerobot: Path
    made_s: float | None  # conversion + export, when done in this run


def ensure_content(cache: Path, spec: BagSpec) -> Content:
    """The converted dataset and its LeRobot export (made in a temporary directory, then renamed)."""
    bag = ensure_bag(cache, spec)
    for stale in cache.glob("training-*"):
        if not stale.name.endswith(f"-g{generator_hash()}"):
            shutil.rmtree(stale, ignore_errors=True)
    entry = cache / f"training-{spec.key}"
    made_s = None
    if not (entry / "info.json").is_file():
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=cache))
        try:
            start = time.perf_counter()
            convert(bag.path, tmp / "dataset", None)
            to_lerobot(tmp / "dataset", tmp / "lerobot")
            made_s = time.perf_counter() - start
            (tmp / "info.json").write_text(json.dumps({"made_s": made_s}))
            tmp.rename(entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Content(entry / "dataset", entry / "lerobot", made_s)


def delta_timestamps(dataset: Path) -> tuple[dict[str, list[float]], int]:
    """The workload's windows, by the keys both loaders use, and the rate they are in."""
    source = load_dataset(dataset)
    fps = dataset_fps(source)
    deltas = {camera_key(camera): [k / fps for k in range(1 - HISTORY_FRAMES, 1)] for camera in colour_cameras(source)}
    deltas["action"] = [k / fps for k in range(ACTIONS_AHEAD)]
    return deltas, fps


# -- the venvs and the children -----------------------------------------------------------------


def torch_python() -> Path:
    subprocess.run(["bash", str(REPO / "scripts" / "torch-env.sh")], check=True)
    return REPO / ".cache" / "torch-venv" / "bin" / "python"


def lerobot_python() -> Path:
    built = subprocess.run(
        [str(LEROBOT_SETUP), str(REPO / ".cache" / "lerobot-venv")], check=True, capture_output=True, text=True
    )
    return Path(built.stdout.strip().splitlines()[-1])


def run_child(
    python: Path, loader: str, root: Path, deltas: dict[str, list[float]], fps: int, batches: int, s3: bool
) -> dict[str, Any]:
    """One loader's run in its venv; its figures (or ``{"failed": line}``)."""
    command = [str(python), str(CHILD), "--loader", loader, "--root", str(root), "--deltas", json.dumps(deltas)]
    command += ["--fps", str(fps), "--batches", str(batches)] + (["--s3"] if s3 else [])
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    child = subprocess.run(command, capture_output=True, text=True, env=env)
    if child.returncode != 0:
        lines = child.stderr.strip().splitlines() or [f"exit code {child.returncode}"]
        return {"failed": lines[-1]}
    figures: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return figures


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the most samples/s (other load on the machine only slows a run)."""
    ok = [run for run in runs if "failed" not in run]
    return max(ok, key=lambda run: float(run["samples_per_s"])) if ok else runs[-1]


# -- the table ----------------------------------------------------------------------------------


def loader_rows(section: str, what: str, run: dict[str, Any]) -> list[Row]:
    if "failed" in run:
        return [Row(section, what, "failed", run["failed"])]
    rss, pss = (", ".join(f"{v / MB:.0f}" for v in run[key]) for key in ("worker_rss", "worker_pss"))
    largest = max(run["worker_rss"], default=0) / MB
    return [
        Row(
            section,
            f"{what}: samples/s",
            f"{run['samples_per_s']:8.1f}",
            f"{run['samples']} samples in {run['seconds']:.1f} s",
        ),
        Row(
            section,
            f"{what}: first batch",
            f"{run['first_batch_s']:8.2f} s",
            f"opening the dataset before it: {run['open_s']:.2f} s",
        ),
        Row(
            section,
            f"{what}: peak RSS per worker",
            f"{largest:8.0f} MB",
            f"{len(run['worker_rss'])} workers: RSS {rss} MB; PSS {pss} MB",
        ),
    ]


def ratio_rows(section: str, runs: dict[str, dict[str, Any]], baseline: str) -> list[Row]:
    """Each OrtfDataset run against the floor (cost per sample) and ``baseline`` (samples/s)."""
    rows = []
    floor = runs.get("floor", {})
    for name in ("ortf", "ortf-episodes"):
        run = runs.get(name, {})
        if "samples_per_s" not in run:
            continue
        if "samples_per_s" in floor:
            cost = floor["samples_per_s"] / run["samples_per_s"]
            rows.append(
                Row(
                    section,
                    f"{LOADERS[name]}: cost per sample / floor's",
                    f"{cost:8.2f}x",
                    f"target <= {FLOOR_TARGET:g}x",
                )
            )
        other = runs.get(baseline, {})
        if "samples_per_s" in other:
            speed = run["samples_per_s"] / other["samples_per_s"]
            target = f"target >= {SPEED_TARGET:g}x" if baseline == "lerobot" else "S3 / local disk"
            rows.append(Row(section, f"{LOADERS[name]}: samples/s / {LOADERS[baseline]}'s", f"{speed:8.2f}x", target))
        worst = max(run["worker_rss"], default=0) / MB
        rows.append(
            Row(section, f"{LOADERS[name]}: largest worker RSS", f"{worst:8.0f} MB", f"target < {RSS_TARGET_MB:g} MB")
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 10 s dataset and 10 batches")
    parser.add_argument("--batches", type=int, default=40, help="batches timed after the first (default 40)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each loader, interleaved; the best is kept")
    parser.add_argument("--skip-s3", action="store_true", help="no S3 section")
    parser.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE, help="where generated bags and datasets are kept"
    )
    args = parser.parse_args()
    batches = 10 if args.quick else args.batches
    cache: Path = args.cache_dir.resolve()
    prune_cache(cache)
    spec = BagSpec(10.0 if args.quick else 60.0, compressed=True)
    content = ensure_content(cache, spec)
    deltas, fps = delta_timestamps(content.dataset)
    pythons = {"torch": torch_python(), "lerobot": lerobot_python()}
    print(f"ortf_ros training benchmark: {os.cpu_count()} CPUs, PyAV {av.__version__}, Python {sys.version.split()[0]}")
    made = f"made in {content.made_s:.0f} s in this run" if content.made_s is not None else "cached"
    content_line = (
        f"{spec.length}, 2 cameras 640x480 @ {fps} fps, JointState 500 Hz, wrench 1 kHz ({made}); "
        f"DataLoader(batch_size=32, shuffle=True, num_workers=2), {batches} batches timed after the first; "
        f"delta_timestamps {{{', '.join(f'{k}: {len(v)}' for k, v in deltas.items())}}}"
    )

    local: dict[str, list[dict[str, Any]]] = {name: [] for name in LOADERS}
    for _ in range(args.repeat):
        for name in LOADERS:
            python, root = (
                (pythons["lerobot"], content.lerobot) if name == "lerobot" else (pythons["torch"], content.dataset)
            )
            local[name].append(run_child(python, name, root, deltas, fps, batches, s3=False))
    runs = {name: best(found) for name, found in local.items()}
    section = f"1. Local disk: {content_line}"
    rows = [row for name, what in LOADERS.items() for row in loader_rows(section, what, runs[name])]
    rows += ratio_rows(section, runs, "lerobot")

    section = "2. S3 (moto's server on 127.0.0.1) against local disk, the same workload"
    if args.skip_s3:
        rows.append(Row(section, "skipped", "-", "--skip-s3"))
    else:
        s3 = {
            name: best(
                [
                    run_child(pythons["torch"], name, content.dataset, deltas, fps, batches, s3=True)
                    for _ in range(args.repeat)
                ]
            )
            for name in ("ortf", "ortf-episodes")
        }
        if all("failed" in run for run in s3.values()):
            rows.append(Row(section, "skipped", "-", f"OrtfDataset cannot read s3:// here: {s3['ortf']['failed']}"))
        else:
            for name, run in s3.items():
                rows += loader_rows(section, f"{LOADERS[name]} from S3", run)
            for name, run in s3.items():
                if "samples_per_s" in run and "samples_per_s" in runs[name]:
                    speed = run["samples_per_s"] / runs[name]["samples_per_s"]
                    rows.append(Row(section, f"{LOADERS[name]}: samples/s S3 / local disk", f"{speed:8.2f}x"))
                    cost = (
                        runs["floor"]["samples_per_s"] / run["samples_per_s"]
                        if "samples_per_s" in runs["floor"]
                        else None
                    )
                    if cost is not None:
                        rows.append(
                            Row(
                                section,
                                f"{LOADERS[name]} from S3: cost per sample / local floor's",
                                f"{cost:8.2f}x",
                                "no target: moto's server, in Python, serves from the same 2 CPUs",
                            )
                        )
    print_table(rows)


if __name__ == "__main__":
    main()
