"""Another dataset's committed episode appended to this one as it is: its step and sample
rows relabelled with the new episode's id, its videos, audio, clouds and annotations
copied unchanged (no re-encode). Parallel conversion (``fleet``) writes each recording
to a dataset of its own and imports them in order, since a dataset has one writer."""

from __future__ import annotations

import shutil

import pyarrow as pa

from ortf_ros.dataset.reader import Episode
from ortf_ros.dataset.staging import EpisodeOutcome
from ortf_ros.dataset.writer import DatasetWriter, manifest_differences
from ortf_ros.errors import WriterError
from ortf_ros.format import point_clouds
from ortf_ros.format.accounting import accounts_to_rows
from ortf_ros.format.metadata import EpisodeRecord


def import_episode(writer: DatasetWriter, episode: Episode) -> EpisodeRecord:
    """Append to ``writer`` a committed episode of another dataset laid out like its own,
    its videos copied as they are (no re-encode); the episode's record."""
    source = episode.dataset
    differences = manifest_differences(writer.manifest, source.manifest)
    if differences:
        raise WriterError(f"{source.root}: cannot import episode {episode.episode_id}: " + "; ".join(differences))
    record = episode.record
    task = episode.task
    writer.begin_episode(task.instruction, task_type=task.type, recorded_at=record.recorded_at, source=record.source)
    recording = writer.recording
    try:
        terminal = False
        for batch in episode.step_batches():
            relabelled = _relabel(batch, recording.schema, recording.header.episode_id, recording.steps)
            recording.step_log.append(relabelled)
            recording.steps += batch.num_rows
            terminal = bool(batch.column("is_terminal")[-1].as_py())
        for stream in writer.manifest.native_streams:
            log = recording.stream_log(writer.manifest, stream)
            for batch in episode.stream_batches(stream):
                log.append(_relabel(batch, log.schema, recording.header.episode_id, None))
        for microphone in recording.audio:
            writer.add_audio_file(microphone, *episode.audio_files(microphone))
        for name in point_clouds.declarations(writer.manifest):
            chunk, index = episode.record.chunk_id, source.file_index(episode.record)
            recording.cloud_log(writer.manifest, name).append_file(
                source.root / point_clouds.cloud_path(name, chunk, index)
            )
        for camera in writer.manifest.cameras:
            target = recording.staged.video_file(camera)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(episode.video_path(camera), target)
        if episode.annotations_dir.is_dir():
            shutil.copytree(episode.annotations_dir, recording.staged.annotations_dir)
    except BaseException:
        writer.discard_episode()
        raise
    outcome = EpisodeOutcome(
        record.success, record.failure_reason, record.operator_notes, terminal, accounts_to_rows(record.accounting)
    )
    return writer.commit_episode(outcome)


def _relabel(batch: pa.RecordBatch, schema: pa.Schema, episode_id: str, first_step: int | None) -> pa.RecordBatch:
    """Rows of another dataset under this episode's id (and, for steps, staged step indices)."""
    columns = {name: batch.column(name) for name in schema.names}
    columns["episode_id"] = pa.array([episode_id] * batch.num_rows, pa.string())
    if first_step is not None:
        columns["step_index"] = pa.array(range(first_step, first_step + batch.num_rows), pa.int64())
    return pa.RecordBatch.from_arrays([columns[n].cast(schema.field(n).type) for n in schema.names], schema=schema)
