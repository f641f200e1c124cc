"""The two pages' HTML, written on the server from the episode index (no template
engine: two pages, every value escaped here). What changes while a page is open (the
doctor's findings, the plots) is fetched by the page's script from the JSON routes.

Every control carries a ``data-testid`` (issue 25 lists them): tests and users' own
automation drive the pages through them.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from ortf_ros.dataset.reader import Episode
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.format.scene_objects import FIRST_FRAME_FILE
from ortf_ros.review.catalog import Snapshot, episode_drops, flag_word, outcome_word

READ_ONLY_NOTE = "A recorder is writing this dataset: it is open read-only (decisions cannot be saved until it stops)."


def _page(title: str, body: str, scripts: list[str], attributes: str) -> str:
    tags = "".join(f'<script src="/static/{escape(s)}"></script>' for s in scripts)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/static/review.css"></head>'
        f"<body {attributes}>{body}{tags}</body></html>\n"
    )


def _read_only_banner(read_only: bool) -> str:
    return f'<p class="read-only" data-testid="read-only">{escape(READ_ONLY_NOTE)}</p>' if read_only else ""


def _task(snapshot: Snapshot, record: EpisodeRecord) -> str:
    task = snapshot.dataset.tasks.get(record.task_id)
    return task.instruction if task is not None else f"task {record.task_id}"


def list_page(snapshot: Snapshot, read_only: bool) -> str:
    dataset = snapshot.dataset
    rows = []
    for record in dataset.episodes:
        drops = episode_drops(record)
        outcome = outcome_word(record.success)
        flag = record.review_flag
        task = _task(snapshot, record)
        episode_id = escape(record.episode_id)
        rows.append(
            f'<tr data-testid="episode-row" data-episode-id="{episode_id}" data-task="{escape(task)}" '
            f'data-outcome="{outcome}" data-duration="{record.duration_seconds:.6f}" '
            f'data-drops="{"" if drops is None else drops}" data-flag="{flag_word(flag)}" data-findings="">'
            f'<td><a href="/episodes/{episode_id}" data-testid="episode-link">{episode_id}</a></td>'
            f'<td>{escape(task)}</td><td class="number">{record.duration_seconds:.2f} s</td>'
            f'<td class="outcome {outcome}">{outcome}</td>'
            f'<td class="number findings" data-testid="findings-count">…</td>'
            f'<td class="number">{"n/a" if drops is None else drops}</td>'
            f"<td>{flag_word(flag)}</td></tr>"
        )
    tasks = sorted({_task(snapshot, r) for r in dataset.episodes})
    task_options = "".join(f'<option value="{escape(t)}">{escape(t)}</option>' for t in tasks)
    outcomes = "".join(f'<option value="{o}">{o}</option>' for o in ("success", "failure", "unlabelled"))
    columns = [
        ("id", "text"),
        ("task", "text"),
        ("duration", "number"),
        ("outcome", "text"),
        ("findings", "number"),
        ("drops", "number"),
        ("flag", "text"),
    ]
    header = "".join(
        f'<th data-sort="{name}" data-type="{kind}" data-testid="sort-{name}" tabindex="0">{name}</th>'
        for name, kind in columns
    )
    name = dataset.manifest.name
    body = (
        f'<header><h1>{escape(name)}</h1><p class="path">{escape(str(dataset.root))}: '
        f"{len(dataset.episodes)} episodes</p>{_read_only_banner(read_only)}</header>"
        '<section class="filters">'
        f'<label>Task <select data-testid="filter-task"><option value="">all</option>{task_options}</select></label>'
        f'<label>Outcome <select data-testid="filter-outcome"><option value="">all</option>{outcomes}</select></label>'
        '<label><input type="checkbox" data-testid="filter-findings"> has findings</label>'
        '<span data-testid="shown-count"></span>'
        '<span class="doctor" data-testid="doctor-state"></span>'
        "</section>"
        f'<table class="episodes" data-testid="episode-table"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    read_only_attribute = "true" if read_only else "false"
    return _page(f"ortf review: {name}", body, ["list.js"], f'data-page="list" data-read-only="{read_only_attribute}"')


def episode_json(snapshot: Snapshot, episode: Episode) -> dict[str, Any]:
    """The episode's labels and place, as the page's script starts from (and a save returns)."""
    record = episode.record
    return {
        "episode_id": record.episode_id,
        "task": _task(snapshot, record),
        "duration": record.duration_seconds,
        "length": record.length,
        "recorded_at": record.recorded_at,
        "success": record.success,
        "failure_reason": record.failure_reason,
        "operator_notes": record.operator_notes,
        "review_flag": record.review_flag,
        "drops": episode_drops(record),
    }


def _cameras(episode: Episode) -> str:
    figures = []
    for camera, sensor in episode.dataset.manifest.cameras.items():
        if not episode.record.video_files.get(camera):
            continue
        name = escape(camera)
        base = f"/episodes/{escape(episode.episode_id)}"
        if sensor.is_depth:
            media = (
                f'<img data-testid="video-{name}" data-camera="{name}" data-depth="true" '
                f'src="{base}/depth/{name}?t=-1" alt="{name} (depth, colourised)">'
            )
        else:
            media = (
                f'<video data-testid="video-{name}" data-camera="{name}" src="{base}/videos/{name}" '
                'preload="auto" muted playsinline></video>'
            )
        kind = "depth, colourised on the server" if sensor.is_depth else sensor.name
        figures.append(f"<figure>{media}<figcaption>{name} <small>({escape(kind)})</small></figcaption></figure>")
    return "".join(figures) or "<p>This episode has no camera.</p>"


def _annotated_frame(episode: Episode) -> str:
    """The episode's ``first_frame.jpg`` (``ortf annotate``, or its detections), if it has one."""
    if not (episode.annotations_dir / FIRST_FRAME_FILE).is_file():
        return ""
    source = f"/episodes/{escape(episode.episode_id)}/annotations/{FIRST_FRAME_FILE}"
    return (
        '<section class="annotations"><h2>Scene objects</h2>'
        f'<img data-testid="first-frame" src="{source}" alt="the annotated frame with its objects\' boxes">'
        "</section>"
    )


def _neighbours(snapshot: Snapshot, episode: Episode) -> str:
    ids = [e.episode_id for e in snapshot.dataset.episodes]
    at = ids.index(episode.episode_id)
    links = []
    if at > 0:
        links.append(
            f'<a href="/episodes/{escape(ids[at - 1])}" data-testid="previous" rel="prev">← {escape(ids[at - 1])}</a>'
        )
    if at + 1 < len(ids):
        links.append(
            f'<a href="/episodes/{escape(ids[at + 1])}" data-testid="next" rel="next">{escape(ids[at + 1])} →</a>'
        )
    return " ".join(links)


def _decision(data: dict[str, Any], read_only: bool) -> str:
    disabled = " disabled" if read_only else ""
    success = data["success"]

    def radio(value: str, label: str, checked: bool) -> str:
        mark = " checked" if checked else ""
        return (
            f'<label><input type="radio" name="outcome" value="{value}" data-testid="outcome-{value}"'
            f"{mark}{disabled}> {label}</label>"
        )

    flag = " checked" if data["review_flag"] else ""
    return (
        '<form class="decision" data-testid="decision" onsubmit="return false">'
        "<fieldset><legend>Outcome</legend>"
        f"{radio('success', 'success', success is True)}{radio('failure', 'failure', success is False)}"
        f"{radio('unlabelled', 'not labelled', success is None)}</fieldset>"
        f'<label>Failure reason <input type="text" name="failure_reason" data-testid="failure-reason" '
        f'value="{escape(data["failure_reason"] or "")}"{disabled}></label>'
        f'<label>Notes <textarea name="operator_notes" rows="3" data-testid="notes"{disabled}>'
        f"{escape(data['operator_notes'] or '')}</textarea></label>"
        f'<label><input type="checkbox" name="review_flag" data-testid="flag"{flag}{disabled}>'
        " flag this episode</label>"
        '<div class="actions">'
        f'<button type="button" data-testid="save"{disabled}>Save</button>'
        '<span class="error" data-testid="save-error" hidden></span>'
        f'<button type="button" class="danger" data-testid="delete"{disabled}>Delete episode…</button>'
        "</div>"
        '<div class="confirm" data-testid="delete-dialog" hidden>'
        f"<p>Delete episode {escape(data['episode_id'])} and its files from the dataset? This cannot be undone.</p>"
        f'<button type="button" class="danger" data-testid="confirm-delete"{disabled}>Delete</button> '
        '<button type="button" data-testid="cancel-delete">Keep it</button></div>'
        "</form>"
    )


def episode_page(snapshot: Snapshot, episode: Episode, read_only: bool, rerun: bool) -> str:
    data = episode_json(snapshot, episode)
    episode_id = escape(episode.episode_id)
    rerun_link = (
        f'<a href="/episodes/{episode_id}.rrd" data-testid="rerun" download>Open in Rerun (.rrd)</a>' if rerun else ""
    )
    facts = [f"{data['duration']:.2f} s", f"{data['length']} steps"]
    if data["recorded_at"]:
        facts.append(f"recorded {escape(data['recorded_at'])}")
    body = (
        '<header><nav><a href="/" data-testid="back">All episodes</a> '
        f"{_neighbours(snapshot, episode)} {rerun_link}</nav>"
        f'<h1>Episode {episode_id}</h1><p class="task" data-testid="task">{escape(data["task"])}</p>'
        f'<p class="facts">{", ".join(facts)}</p>{_read_only_banner(read_only)}</header>'
        f'<section class="cameras">{_cameras(episode)}</section>'
        '<section class="transport">'
        '<button type="button" data-testid="play">Play</button>'
        f'<input type="range" data-testid="seek" min="0" max="{data["duration"]:.3f}" step="0.01" value="0">'
        '<span data-testid="time">0.00 s</span></section>'
        '<div class="main"><div class="plot" id="plot" data-testid="plot"></div>'
        f"<aside>{_decision(data, read_only)}{_annotated_frame(episode)}"
        '<section class="findings"><h2>Doctor findings</h2>'
        '<p data-testid="findings-state">examining…</p><ul data-testid="findings"></ul></section></aside></div>'
        f'<script type="application/json" id="episode-data">{_json_in_html(data)}</script>'
    )
    read_only_attribute = "true" if read_only else "false"
    return _page(
        f"Episode {episode.episode_id}: ortf review",
        body,
        ["plotly.min.js", "episode.js"],
        f'data-page="episode" data-episode-id="{episode_id}" data-read-only="{read_only_attribute}"',
    )


def _json_in_html(data: dict[str, Any]) -> str:
    """JSON inside a script element: ``</script>`` and ``<!--`` in a value cannot end it."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
