"""Training straight from ORTF: samples with time windows, for a trainer's data loader.

The torch-free core lives here (which steps are samples, what a window is, what a worker
reads), so that the core package never imports torch and its logic is tested without it;
``torch_dataset`` is the thin PyTorch face (``from ortf.torch import OrtfDataset``), in the
``ortf_ros[torch]`` extra.
"""
