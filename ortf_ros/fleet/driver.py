"""Many recordings into one dataset, by one of three runners, resumable.

- **In place** (no runner): each recording converted straight into the dataset, one
  after the other.
- **In scratch** (a ``ProcessRunner`` of this machine, a ``RayRunner`` of a cluster):
  each recording converted by a worker into a scratch dataset of its own beside the
  output; the driver imports its episodes (videos copied, not encoded again) in input
  order, since a dataset has one writer. At most ``2 x parallelism`` recordings are in
  flight or waiting for their turn, so neither the driver's memory nor the scratch
  space grows with the number of recordings.

Each recording is first looked up in the dataset (``Ledger``): one held whole is skipped,
one held in part is converted again in scratch and only its missing episodes imported.
With ``again`` (``--again``), each is converted anew whatever the dataset holds of it, and
its episodes added beside those of its earlier conversions (``Outcome.again_of``): the one
place that decides what is skipped, for all three runners.
A recording that fails (unreadable, refused) fails alone: it is reported, the others are
converted, and the run's result says so (``Totals.failed``). What the output itself
cannot take (a full disk, a lock held by another writer) stops the run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from ortf_ros.dataset.held_recordings import HeldRecording
from ortf_ros.dataset.importing import import_episode
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.run_lock import run_lock
from ortf_ros.dataset.staging import HEADER_FILE, StagedEpisode, lock_dataset, staged_episode_dirs
from ortf_ros.dataset.writer import DatasetWriter, check_target
from ortf_ros.errors import OrtfError, WriterError, failure_line
from ortf_ros.fleet.ledger import Ledger
from ortf_ros.fleet.settings import ConversionSettings
from ortf_ros.fleet.task import DATASET_DIR, RecordingTask, TaskResult, part_prefix, run_task, storage_failure
from ortf_ros.format import layout
from ortf_ros.format.text import read_text
from ortf_ros.io.scratch import remove_stale, scratch_directory
from ortf_ros.pipeline.offline import ConversionResult, convert_recording
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.pipeline.sources.identity import RecordingIdentity, recording_identity

SCRATCH_PREFIX = ".ortf-bag2ortf-"  # the workers' datasets, beside the output
WAITING_SLOTS = 1024
"""Recordings already decided (skipped, failed before converting) that may wait behind a
conversion for their turn to be reported, besides the conversions in flight."""


class Runner(Protocol):
    """Where scratch conversions run (``pool.ProcessRunner``, ``ray_runner.RayRunner``)."""

    conversions_at_once: int | None

    @property
    def parallelism(self) -> int:
        """How many conversions run at once."""

    def submit(self, task: RecordingTask) -> Future[TaskResult]: ...

    def failure(self, exc: BaseException, task: RecordingTask) -> str | None:
        """A task's exception as its recording's failure line; None: not the runner's to
        explain (re-raised). It raises itself what stops the run (a broken pool)."""

    def describe(self) -> str:
        """Where the conversions run, said once they have begun."""

    def stop(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """What became of one recording: converted (``result``), ``skipped`` (why), or failed
    (``error``); ``episodes``: its episodes in the dataset; ``again_of``: what the dataset held
    of it before it was converted again (``--again``), for the user to delete or keep."""

    index: int
    input: Path
    size: int = 0
    result: ConversionResult | None = None
    episodes: tuple[str, ...] = ()
    skipped: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()
    again_of: HeldRecording | None = None


@dataclass
class Totals:
    recordings: int = 0
    converted: int = 0
    skipped: int = 0
    failed: int = 0
    bytes: int = 0


@dataclass
class _Slot:
    """A recording in the queue: decided already (``outcome``), or to convert."""

    index: int
    input: Path
    identity: RecordingIdentity | None = None
    held: HeldRecording | None = None  # what the dataset holds of it: the other places are imported
    notes: tuple[str, ...] = ()
    again_of: HeldRecording | None = None
    outcome: Outcome | None = None
    task: RecordingTask | None = None
    future: Future[TaskResult] | None = None


@dataclass
class FleetConversion:
    """``inputs`` (recordings, in order) into the dataset ``output``. ``report`` hears each
    recording's outcome in input order; ``progress(done, total, bytes)`` after each;
    ``message_progress(done, total)``, the messages a conversion in place has read.
    ``again``: convert every recording anew, also those the dataset holds or held."""

    output: Path
    settings: ConversionSettings
    runner: Runner | None = None
    again: bool = False
    report: Callable[[Outcome], None] = lambda _: None
    progress: Callable[[int, int, int], None] | None = None
    message_progress: Callable[[int, int], None] | None = None  # (messages read) of a conversion in place
    say: Callable[[str], None] = lambda _: None  # what the run did besides converting
    totals: Totals = field(default_factory=Totals)
    _writer: DatasetWriter | None = None
    _scratch: Path | None = None

    def run(self, inputs: Sequence[Path]) -> Totals:
        self.totals = Totals(recordings=len(inputs))
        if self.progress is not None:
            self.progress(0, len(inputs), 0)  # (the total shown from the start)
        beside = _beside(self.output)
        check_target(self.output)  # (a dataset refused leaves no trace, not even the run lock's file)
        with contextlib.ExitStack() as stack:
            stack.enter_context(run_lock(self.output))
            remove_stale(beside, SCRATCH_PREFIX, settle=_wait_for_encoders)  # what runs killed earlier left
            self._discard_cut_conversions(inputs)
            _check_writable(self.output)
            stack.callback(self._close_writer)
            ledger = Ledger(self.output)
            if ledger.unsourced:
                self.say(
                    f"{self.output}: {ledger.unsourced} episode(s) say nothing of the recording they came from "
                    "(written before episodes did, or by another tool): recordings converted into them are not "
                    "recognised, and are converted again"
                )
            slots = self._plan(inputs, ledger)
            if self.runner is None:
                for slot in slots:
                    self._done(self._in_place(slot, stack))
            else:
                self._scratch = stack.enter_context(scratch_directory(beside, SCRATCH_PREFIX, _wait_for_encoders))
                self._in_scratch(slots, self.runner)
        return self.totals

    def _discard_cut_conversions(self, inputs: Sequence[Path]) -> None:
        """Episodes a killed run left staged in the output, when each was being converted
        (or imported) from a recording of this run: converting it again makes it whole,
        where ``ortf recover`` would keep what the killed run had logged. One that was
        being committed is committed. Anything else staged (a live recorder's) is left
        for ``ortf recover``, and the run stops saying so."""
        given = {os.path.abspath(path) for path in inputs}
        staged = [StagedEpisode(directory) for directory in staged_episode_dirs(self.output)]
        headers = [episode.header() if (episode.directory / HEADER_FILE).exists() else None for episode in staged]
        if not staged or not all(h is None or (h.source is not None and h.source.path in given) for h in headers):
            return
        for result in recover(self.output, discard=True):
            self.say(f"{self.output}: a run was cut off; {result.line()}")

    # -- deciding -----------------------------------------------------------------

    def _plan(self, inputs: Sequence[Path], ledger: Ledger) -> Iterator[_Slot]:
        for index, path in enumerate(inputs):
            try:
                identity = recording_identity([path])
            except (OSError, OrtfError) as exc:
                yield _Slot(index, path, outcome=Outcome(index, path, error=failure_line(exc) or str(exc)))
                continue
            held = ledger.holds(identity)
            size = identity.size
            if held is not None and held.whole and not self.again:
                skipped = held.describe()
                outcome = Outcome(index, path, size, episodes=tuple(held.ids()), skipped=skipped)
                yield _Slot(index, path, outcome=outcome)
                continue
            same = ledger.taken(identity, str(path))
            if same is not None:
                skipped = f"the same recording as {same} (converted once)"
                yield _Slot(index, path, outcome=Outcome(index, path, size, skipped=skipped))
                continue
            notes: tuple[str, ...] = ()
            if held is None and ledger.changed(identity):
                notes = (f"{identity.path}: other content was converted from this path before; converted as new",)
            if self.again and held is not None:  # all of its episodes anew, beside the earlier ones
                yield _Slot(index, path, identity, None, notes, again_of=held)
                continue
            yield _Slot(index, path, identity, held, notes)

    # -- in place -----------------------------------------------------------------

    def _in_place(self, slot: _Slot, stack: contextlib.ExitStack) -> Outcome:
        if slot.outcome is not None:
            return slot.outcome
        if slot.held is not None:  # a part of it is in the dataset: the rest through scratch
            if self._scratch is None:
                directory = scratch_directory(_beside(self.output), SCRATCH_PREFIX, _wait_for_encoders)
                self._scratch = stack.enter_context(directory)
            slot.task = RecordingTask(slot.index, _absolute(slot.input), self._scratch, self.settings)
            try:
                return self._imported(slot, run_task(slot.task))
            finally:
                self._close_writer()  # (the next recording converts in place, with a writer of its own)
                _remove_attempts(self._scratch, slot.index)
        try:
            with BagSource([slot.input]) as source:
                config = self.settings.mapping_for(source)
                result = convert_recording(
                    source,
                    self.output,
                    config,
                    urdf=self.settings.urdf,
                    writer_config=self.settings.writer_config(config),
                    mesh_path=self.settings.mesh_path,
                    progress=self.message_progress,
                )
        except Exception as exc:
            return self._failed(slot, exc)
        return self._outcome(slot, result=result, episodes=tuple(e.episode_id for e in result.episodes))

    def _failed(self, slot: _Slot, exc: Exception) -> Outcome:
        """The recording's failure, or ``exc`` raised again when it is the output's (a
        full disk, the dataset's lock held) or a bug's: the run cannot go on."""
        line = failure_line(exc)
        if line is None or storage_failure(exc) or (isinstance(exc, OSError) and _inside(exc.filename, self.output)):
            raise exc
        return self._outcome(slot, error=line)

    # -- in scratch ---------------------------------------------------------------

    def _in_scratch(self, slots: Iterator[_Slot], runner: Runner) -> None:
        assert self._scratch is not None
        queue: deque[_Slot] = deque()
        converting = 0
        room = 0  # recordings that may be in flight (known once the runner has started)
        try:
            for slot in slots:
                if slot.outcome is None:
                    slot.task = RecordingTask(
                        slot.index, _absolute(slot.input), self._scratch, self.settings, runner.conversions_at_once
                    )
                    slot.future = runner.submit(slot.task)
                    if not room:
                        room = 2 * runner.parallelism
                        self.say(runner.describe())
                    converting += 1
                queue.append(slot)
                while queue and ((room and converting >= room) or len(queue) > WAITING_SLOTS):
                    converting -= self._next(queue, runner)
            while queue:
                self._next(queue, runner)
        except BaseException:
            runner.stop()
            raise

    def _next(self, queue: deque[_Slot], runner: Runner) -> int:
        """Report the recording at the head of the queue (waiting for its conversion and
        importing it); 1 if it was one being converted."""
        slot = queue.popleft()
        if slot.future is None or slot.task is None:
            assert slot.outcome is not None
            self._done(slot.outcome)
            return 0
        try:
            result = slot.future.result()
        except Exception as exc:
            line = runner.failure(exc, slot.task)
            if line is None:
                raise
            result = TaskResult(slot.index, error=line)
        try:
            self._done(self._imported(slot, result))
        finally:
            _remove_attempts(self._scratch, slot.index)
        return 1

    def _imported(self, slot: _Slot, task: TaskResult) -> Outcome:
        """The scratch dataset's episodes imported (those the output does not hold yet)."""
        if task.storage:
            raise WriterError(task.error or "the scratch storage takes nothing more")
        if task.error is not None or task.dataset is None or task.result is None:
            return self._outcome(slot, error=task.error or "no result")
        try:
            converted = load_dataset(task.dataset)
            held = slot.held if slot.held is not None else HeldRecording(str(slot.input))
            present = held.episodes
            writer = self._writer_for(converted)
            episodes = []
            for position, episode in enumerate(converted):
                source = episode.record.source
                place = source.episode if source is not None else position
                if place in present:
                    episodes.append(present[place])
                elif not held.has(place):  # (a place whose episode was deleted stays deleted)
                    episodes.append(import_episode(writer, episode).episode_id)
            if present:  # (those imported say how many there are; those held before may not)
                writer.complete_source(list(present.values()), len(converted.episodes))
        except Exception as exc:
            if isinstance(exc, OrtfError):
                return self._failed(slot, exc)
            raise
        return self._outcome(slot, result=task.result, episodes=tuple(episodes))

    def _writer_for(self, converted: Dataset) -> DatasetWriter:
        """The output's writer, opened at the first import with the first recording's
        manifest (and kept: opening reads the whole episode index)."""
        if self._writer is None:
            urdf = converted.root / layout.URDF
            manifest = replace(converted.manifest, dataset_id="", created_at=None)
            writer = DatasetWriter(self.output, manifest, urdf=read_text(urdf) if urdf.exists() else None)
            writer.open()
            self._writer = writer
        meshes = converted.root / layout.MESHES_DIR
        target = self.output / layout.MESHES_DIR
        if meshes.is_dir() and not target.exists():
            # Copied beside, then renamed: a run killed mid-copy leaves no partial meshes
            # directory that later runs would take as complete.
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=".meshes-"))
            shutil.copytree(meshes, partial, dirs_exist_ok=True)
            partial.rename(target)
        return self._writer

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    # -- reporting ----------------------------------------------------------------

    def _outcome(
        self,
        slot: _Slot,
        *,
        result: ConversionResult | None = None,
        episodes: tuple[str, ...] = (),
        error: str | None = None,
    ) -> Outcome:
        size = slot.identity.size if slot.identity is not None else 0
        return Outcome(
            slot.index, slot.input, size, result, episodes, error=error, notes=slot.notes, again_of=slot.again_of
        )

    def _done(self, outcome: Outcome) -> None:
        totals = self.totals
        if outcome.error is not None:
            totals.failed += 1
        elif outcome.skipped is not None:
            totals.skipped += 1
        else:
            totals.converted += 1
        if outcome.result is not None:
            totals.bytes += outcome.size  # (the data rate is the converted recordings')
        self.report(outcome)
        if self.progress is not None:
            self.progress(totals.converted + totals.skipped + totals.failed, totals.recordings, totals.bytes)


def _check_writable(output: Path) -> None:
    """An existing dataset that another process is writing, or that needs ``ortf recover``,
    stops the run before anything is converted (not once a recording, every one failing)."""
    if (output / layout.MANIFEST).exists():
        DatasetWriter(output).open().close()


def _beside(output: Path) -> Path:
    """The directory that holds ``output``, as every node names it (not resolved: a link
    on this machine may not be one on the others)."""
    return Path(os.path.abspath(output)).parent


def _absolute(path: Path) -> Path:
    """``path`` for a worker, whose working directory is not the command's."""
    return Path(os.path.abspath(path))


def _inside(filename: object, root: Path) -> bool:
    if not isinstance(filename, str | bytes):
        return filename is None  # an OSError naming no file: the output's (a full disk says none)
    path = Path(filename.decode() if isinstance(filename, bytes) else filename).absolute()
    return path == root.absolute() or root.absolute() in path.parents


def _remove_attempts(scratch: Path | None, index: int) -> None:
    """Every attempt's directory at recording ``index``: the one imported, and those of
    workers that died (once their encoder processes let go of them)."""
    if scratch is None:
        return
    for attempt in scratch.glob(f"{part_prefix(index)}*"):
        _settle(attempt)
        shutil.rmtree(attempt, ignore_errors=True)


def _wait_for_encoders(scratch: Path) -> None:
    """A killed run's workers, or a killed worker, leave encoder processes that finish their
    videos in its scratch datasets, holding each dataset's writer lock until then: wait for
    them (up to the lock's wait), so the directory is not removed under them."""
    for attempt in sorted(scratch.glob("part-*")):
        _settle(attempt)


def _settle(attempt: Path) -> None:
    dataset = attempt / DATASET_DIR
    if (dataset / layout.STAGING_DIR).is_dir():
        with contextlib.suppress(WriterError):
            lock_dataset(dataset).close()
