"""``ortf episodes set`` and ``ortf episodes delete``: the review decisions from the shell
(``ortf_ros.dataset.edits``, which the review page calls too).

Every id is checked before anything is written or asked, and a delete is confirmed: on a
terminal by a question, elsewhere (a script, a pipe) only by ``--yes``, so that a script
missing it stops with a usage error instead of waiting for an answer nobody gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ortf_ros.cli.boundary import EXIT_FAILED, EXIT_OK, OneLineParser
from ortf_ros.cli.conversions import DATASET
from ortf_ros.dataset.catalog import load_manifest
from ortf_ros.dataset.edits import UNCHANGED, delete_episodes, set_episode_labels
from ortf_ros.errors import UnknownEpisodeError, UsageError, naming
from ortf_ros.format.metadata import EpisodeRecord, read_episodes
from ortf_ros.io import paths

LABELS = ("success", "failure_reason", "operator_notes", "review_flag")


def add_episodes(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    p = sub.add_parser("episodes", help="label (set) or delete a dataset's episodes")
    actions = p.add_subparsers(dest="action", required=True, metavar="{set,delete}")

    s = actions.add_parser("set", help="set an episode's outcome, failure reason, notes or review flag")
    s.add_argument("dataset", metavar="DATASET")
    s.add_argument("episode_id", metavar="ID")
    outcome = s.add_mutually_exclusive_group()
    outcome.add_argument("--success", dest="success", action="store_const", const=True, help="the task succeeded")
    outcome.add_argument("--failure", dest="success", action="store_const", const=False, help="the task failed")
    s.add_argument("--failure-reason", metavar="TEXT", help="why it failed (with --failure, or on a failed episode)")
    s.add_argument("--notes", dest="operator_notes", metavar="TEXT", help="operator notes ('' clears them)")
    flag = s.add_mutually_exclusive_group()
    flag.add_argument("--flag", dest="review_flag", action="store_const", const=True, help="flag for review")
    flag.add_argument("--no-flag", dest="review_flag", action="store_const", const=False, help="clear the flag")
    s.set_defaults(run=_cmd_set, prog="ortf episodes set", **dict.fromkeys(LABELS, UNCHANGED))

    d = actions.add_parser("delete", help="delete episodes and every file of theirs")
    d.add_argument("dataset", metavar="DATASET")
    d.add_argument("episode_ids", nargs="+", metavar="ID")
    d.add_argument("--yes", action="store_true", help="delete without asking (required when not on a terminal)")
    d.set_defaults(run=_cmd_delete, prog="ortf episodes delete")


def _cmd_set(args: argparse.Namespace) -> int:
    root = paths.input_dir(args.dataset, DATASET)
    changes = {name: getattr(args, name) for name in LABELS if getattr(args, name) is not UNCHANGED}
    if not changes:
        raise UsageError("nothing to set: give --success or --failure, --failure-reason, --notes, or --flag/--no-flag")
    before = _records(root, [args.episode_id])[0]
    with naming(root):
        after = set_episode_labels(root, args.episode_id, **changes)
    changed = [
        f"{name} {_shown(getattr(before, name))} -> {_shown(getattr(after, name))}"
        for name in LABELS
        if getattr(before, name) != getattr(after, name)
    ]
    print(f"episode {after.episode_id}: {', '.join(changed) if changed else 'unchanged (already so)'}")
    return EXIT_OK


def _cmd_delete(args: argparse.Namespace) -> int:
    root = paths.input_dir(args.dataset, DATASET)
    ids = list(dict.fromkeys(args.episode_ids))
    records = _records(root, ids)
    if not args.yes and not _confirmed(root, ids):
        print(f"{root}: nothing deleted")
        return EXIT_FAILED
    with naming(root):
        delete_episodes(root, ids)
    for record in records:
        print(f"episode {record.episode_id}: deleted ({record.length} steps)")
    return EXIT_OK


def _records(root: Path, ids: list[str]) -> list[EpisodeRecord]:
    """The named episodes as committed now, checked before anything is asked or written."""
    load_manifest(root)
    by_id = {record.episode_id: record for record in read_episodes(root)}
    for episode_id in ids:
        if episode_id not in by_id:
            raise UnknownEpisodeError(f"{root}: no episode with id {episode_id!r}; `ortf info {root}` lists them")
    return [by_id[episode_id] for episode_id in ids]


def _confirmed(root: Path, ids: list[str]) -> bool:
    if not sys.stdin.isatty():
        raise UsageError(f"deleting from {root} needs --yes when not asked on a terminal (standard input is not one)")
    print(f"delete {len(ids)} episode(s) ({', '.join(ids)}) from {root}, with their files? [y/N] ", end="", flush=True)
    try:
        answer = input()
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _shown(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value)
