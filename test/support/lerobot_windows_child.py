"""Run in LeRobot's own venv: the windows ``LeRobotDataset`` gives with ``delta_timestamps``.

Dumps, for every item, each windowed key and its ``<key>_is_pad`` (frames as uint8 HWC, as
they were decoded from), so the parent compares them with ``OrtfDataset``'s on the source.
"""

import json
import sys
from typing import Any

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # type: ignore[import-not-found]  # LeRobot's venv only


def main(root: str, delta: str, out: str) -> None:
    windows = json.loads(delta)
    dataset = LeRobotDataset("local/ortf-export", root=root, delta_timestamps=windows)
    items = [dataset[i] for i in range(len(dataset))]
    arrays: dict[str, Any] = {}
    for key in windows:
        values = np.stack([item[key].numpy() for item in items])
        if key in dataset.meta.video_keys:
            values = np.round(values.transpose(0, 1, 3, 4, 2) * 255).astype(np.uint8)  # (N, T, H, W, C)
        arrays[key] = values
        arrays[f"{key}_is_pad"] = np.stack([item[f"{key}_is_pad"].numpy() for item in items])
    arrays["episode_index"] = np.array([int(item["episode_index"]) for item in items])
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
