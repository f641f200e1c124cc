"""Run in LeRobot's own venv: load an export with ``LeRobotDataset`` and dump every item.

The parent test compares the dump with the ORTF source; this side only reads, so what
is checked is exactly what a trainer using LeRobot 0.4.4 would get. Frames come back
as float CHW in [0, 1]; they are stored as the uint8 HWC images they were decoded from.
"""

import sys
from typing import Any

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # type: ignore[import-not-found]  # LeRobot's venv only


def main(root: str, out: str) -> None:
    dataset = LeRobotDataset("local/ortf-export", root=root)
    items = [dataset[i] for i in range(len(dataset))]
    arrays: dict[str, Any] = {
        "tasks": np.array([item["task"] for item in items]),
        "camera_keys": np.array(dataset.meta.video_keys),
    }
    for key in items[0]:
        if key == "task":
            continue
        values = np.stack([item[key].numpy() for item in items])
        if key in dataset.meta.video_keys:
            values = np.round(values.transpose(0, 2, 3, 1) * 255).astype(np.uint8)
        arrays[key] = values
    arrays["num_episodes"] = np.array(dataset.num_episodes)
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
