"""Run in the TFDS venv: read an RLDS export with ``tensorflow_datasets`` alone and dump it.

The parent test compares the dump with the ORTF source; this side uses no ortf_ros
code, so what is checked is what a trainer calling ``tfds.builder_from_directory`` gets.
Keys: ``info`` (JSON), ``<episode>/episode_metadata/<field>``, and
``<episode>/steps/<path>`` with the steps stacked along the first axis.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow_datasets as tfds  # type: ignore[import-not-found]


def flatten(values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            flat |= flatten(value, f"{prefix}{key}/")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def main(root: str, out: str) -> None:
    builder = tfds.builder_from_directory(root)
    arrays: dict[str, Any] = {}
    count = 0
    for count, episode in enumerate(builder.as_dataset(split="train"), start=1):
        for key, value in episode["episode_metadata"].items():
            arrays[f"{count - 1}/episode_metadata/{key}"] = value.numpy()
        steps = [flatten(step, "") for step in episode["steps"].as_numpy_iterator()]
        for key in steps[0]:
            arrays[f"{count - 1}/steps/{key}"] = np.stack([step[key] for step in steps])
    info = {
        "name": builder.info.name,
        "episodes": count,
        "num_examples": builder.info.splits["train"].num_examples,
        "step_features": sorted(builder.info.features["steps"].feature.keys()),
        "metadata": dict(builder.info.metadata or {}),
    }
    arrays["info"] = np.array(json.dumps(info))
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
