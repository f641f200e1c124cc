"""The bad-input contract of an ``ortf`` subcommand, checked the same way by every test
file that feeds one bad input: exit 1 (2 for a usage error: a path missing or of the wrong
kind, an unknown episode) and one line on stderr that names the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortf_ros.cli.ortf import main as ortf


def one_line_error(capsys: pytest.CaptureFixture[str], command: str, *args: str | Path, code: int = 1) -> str:
    """Run ``ortf COMMAND ARGS...`` (``command`` such as "export mcap"); returns its one error line."""
    assert ortf([*command.split(), *map(str, args)]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"ortf {command}: "), err
    return err
