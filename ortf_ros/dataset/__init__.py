"""The dataset engine: everything that writes, commits, recovers, reads and checks an ORTF
dataset on disk, and nothing else.

It imports only ``ortf_ros.format`` (pure), ``ortf_ros.io`` and ``ortf_ros.errors``, never
``pipeline``, ``playback`` or ``convert``: that keeps the ROS-free ``pip install`` honest and
lets every converter, the recorder and the exports share one writer and one reader.
"""

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import Dataset, Episode, load_dataset
from ortf_ros.dataset.writer import DatasetWriter

__all__ = ["Dataset", "DatasetWriter", "Episode", "WriterConfig", "load_dataset"]
