"""``from ortf.torch import OrtfDataset``: train on ORTF datasets with PyTorch, no export.

The ``ortf_ros[torch]`` extra (torch is not a dependency of the core). The objects are
``ortf_ros.train.torch_dataset``'s own; see ``OrtfDataset`` for what a sample holds.
"""

from __future__ import annotations

from ortf_ros.train.torch_dataset import EpisodeBatchSampler, OrtfDataset

__all__ = ["EpisodeBatchSampler", "OrtfDataset"]
