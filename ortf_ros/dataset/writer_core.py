"""What every part of a ``DatasetWriter`` works on: the dataset (its catalog, once open,
and the writer lock) and the episode in progress (``Recording``). The writer's inputs,
by kind (``video_input``, ``sample_input``, ``step_input``), build on it, as does the
writer itself (``writer``), so that each of them is a module of its own."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from ortf_ros.dataset.catalog import Catalog
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.recording import Recording
from ortf_ros.dataset.staging import DatasetLock
from ortf_ros.errors import WriterError
from ortf_ros.format.manifest import Manifest


class WriterCore:
    """The state a ``DatasetWriter`` is made of (set by its constructor), and its accessors."""

    root: Path
    config: WriterConfig
    _catalog: Catalog | None
    _lock: DatasetLock | None
    _recording: Recording | None

    @property
    def manifest(self) -> Manifest:
        return self._open_catalog().manifest

    @property
    def recording(self) -> Recording:
        """The episode in progress: its staging directory, logs and videos (for what stages
        an episode otherwise than step by step, ``importing``)."""
        if self._recording is None:
            raise WriterError("no episode in progress: call begin_episode first")
        return self._recording

    def _held_lock(self) -> int:
        """The writer lock's file descriptor, for an encoder process to hold as well."""
        if self._lock is None:
            raise WriterError(f"{self.root}: writer is not open")
        return self._lock.fileno()

    def _open_catalog(self) -> Catalog:
        if self._catalog is None:
            raise WriterError(f"{self.root}: writer is not open")
        return self._catalog


def check_keys(
    what: str, kind: str, given: Mapping[str, Any], declared: Collection[str], *, partial: bool = False
) -> None:
    """Refuse (WriterError) keys of ``given`` that are not ``declared``, and unless ``partial``
    declared ones it lacks, naming both."""
    unknown = set(given) - set(declared)
    missing = set() if partial else set(declared) - set(given)
    if unknown or missing:
        raise WriterError(
            f"{what}: unknown {kind}(s) {sorted(unknown)}, missing {sorted(missing)}; declared: {sorted(declared)}"
        )
