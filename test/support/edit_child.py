"""Child process of test_episode_edits: deletes episodes and is SIGKILLed at a chosen point.

``python -m support.edit_child ROOT POINT ID...`` in test/; the points are KILL_POINTS below.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ortf_ros.dataset import catalog, deletion, edits
from ortf_ros.io import atomic
from support.crash_child import die, replace, then_die


def die_at_next_install(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (the index rewrite), then a kill as the next file is about to be renamed
    into place: a chunk table rewritten in full beside its target, not yet installed."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        replace(atomic, "install", lambda *a, **k: die())

    return wrapper


KILL_POINTS: dict[str, Callable[[], None]] = {
    # the journal is written, the episode index not yet rewritten: the delete has not happened
    "plan": lambda: replace(catalog.Catalog, "rewrite", lambda *a, **k: die()),
    # the episode index without the episodes (the commit point); nothing cleaned up yet
    "index": lambda: replace(catalog.Catalog, "rewrite", then_die(catalog.Catalog.rewrite)),
    # a chunk's step table rewritten beside itself, not yet renamed over it
    "table": lambda: replace(catalog.Catalog, "rewrite", die_at_next_install(catalog.Catalog.rewrite)),
    # the first table without the episodes' rows; files, tasks, statistics not yet
    "rows": lambda: replace(deletion, "_remove_rows", then_die(deletion._remove_rows)),
    # every file removed; tasks, statistics, manifest totals and journal not yet
    "stats": lambda: replace(catalog.Catalog, "replace_stats", lambda *a, **k: die()),
}


def main() -> None:
    root, point, ids = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    KILL_POINTS[point]()
    edits.delete_episodes(root, ids)
    print("NOT KILLED", flush=True)


if __name__ == "__main__":
    main()
