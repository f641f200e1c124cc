"""Child process of test_crash: appends one episode and is killed by SIGKILL.

``steps N``: record N steps, announcing each and waiting for a line on stdin before the
next, so the parent kills it at a known step however loaded the machine is.
``commit POINT``: record 10 steps and kill itself at POINT inside end_episode.
``commit timed``: record 10 steps, print COMMITTING and commit; the parent kills it whenever.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from ortf_ros.dataset import catalog, commit
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.io import parquet_append
from ortf_ros.synthetic.demo_arm import DEPTH_CAMERA, RGB_CAMERAS, demo_action, demo_depth, demo_rgb, demo_state

WIDTH, HEIGHT = 64, 48


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def replace(owner: object, name: str, value: object) -> None:
    """Patch ``owner.name``, failing loudly if a rename made the kill point vanish."""
    assert hasattr(owner, name), f"{owner!r} has no {name}"
    setattr(owner, name, value)


def then_die(original: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        die()

    return wrapper


def copy_half_then_die(source: Any, target: Any, count: int) -> None:
    target.write(source.read(count // 2))
    target.flush()
    die()


KILL_POINTS: dict[str, Callable[[], None]] = {
    # the videos are finalized, nothing appended to the step table yet
    "videos": lambda: replace(commit, "_append", lambda *a, **k: die()),
    # the append is journalled, the step table not yet touched
    "journal": lambda: replace(parquet_append, "_write_journal", then_die(parquet_append._write_journal)),
    # inside the append: the old footer cut off, half the new rows written
    "rows": lambda: replace(parquet_append, "_copy", copy_half_then_die),
    # inside the append: every new row written, the merged footer not
    "footer": lambda: replace(parquet_append, "_copy", then_die(parquet_append._copy)),
    # the step table holds the new rows, the episode index does not
    "chunk": lambda: replace(commit, "_append", then_die(commit._append)),
    # the episode index is committed, statistics and manifest totals are stale
    "index": lambda: replace(catalog.Catalog, "_write_episodes", then_die(catalog.Catalog._write_episodes)),
    "timed": lambda: print("COMMITTING", flush=True),
}


def main() -> None:
    root, mode, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    with DatasetWriter(root) as writer:
        writer.begin_episode("Open the drawer")
        steps = int(arg) if mode == "steps" else 10
        for step in range(steps):
            images = {cam: demo_rgb(n, step, WIDTH, HEIGHT) for n, cam in enumerate(RGB_CAMERAS)}
            images[DEPTH_CAMERA[0]] = demo_depth(step, WIDTH, HEIGHT)
            writer.add_step(step / 30, demo_state(2, step), demo_action(2, step), images)
            print(f"STEP {step}", flush=True)
            if mode == "steps":
                sys.stdin.readline()
        if mode == "steps":
            time.sleep(600)
        KILL_POINTS[arg]()
        writer.end_episode(success=True, operator_notes="done")


if __name__ == "__main__":
    main()
