"""What every ortf command-line tool does with errors: the package's own become one
line on stderr and exit 1; Ctrl-C exits 130; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ortf_ros.errors import OrtfError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def run_guarded(prog: str, run: Callable[[], int]) -> int:
    try:
        return run()
    except OrtfError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
