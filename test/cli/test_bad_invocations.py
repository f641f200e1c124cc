"""Every console script over a table of bad invocations, started as a user starts them.

Each case runs the installed script (``ortf``, ``ortf-bag2ortf``, ``ortf_player``,
``ortf_recorder``) as a subprocess, with a timeout, in a directory of its own, and must
end with the exit code the README lists (2 usage, 1 failed), exactly one line on stderr
and no traceback, or, with its standard output closed by the reader, quietly with 141
(with it on a full disk, ``/dev/full``: 1, the line naming standard output). Nothing may
be left behind: the shared inputs and the case's directory are compared before and
after (names, sizes, modification times). Numbers get 0, a negative, nan, inf and a
huge value; paths are missing, a file where a directory is wanted and the reverse,
read-only, ``/dev/stdout``, ``/dev/null``, ``-``, a loop of symbolic links; datasets
hold what a crashed writer left half-staged. ``--help`` of every command goes into a
closed pipe and onto a full disk. The scripts run without ``PYTHONUNBUFFERED``, as a
user's shell starts them (buffered, a write error shows only when the buffer is flushed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.demo_command import MARKER_TEXT
from ortf_ros.cli.ortf import build_parser
from ortf_ros.pipeline.mapping import detect_mapping, write_mapping
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import write_teleop_bag
from support import needs

BIN = Path(sys.executable).parent
TIMEOUT_S = 60
USAGE, FAILED, PIPE_CLOSED = 2, 1, 141
NUMBERS = ("0", "-1", "nan", "inf", "1e300")
EXPORTS = ("mcap", "rerun", "lerobot", "mixtrain", "rlds")


@dataclass(frozen=True)
class Case:
    """``script`` with ``args`` (``{bag}``, ``{dataset}``, ``{afile}``, ``{ro}``... are
    the world's paths), the exit code it must end with, and whether its stdout is a pipe
    whose reader has gone; ``leaves``: files a case may create (work finished before the
    pipe closed)."""

    name: str
    script: str
    args: tuple[str, ...]
    code: int = USAGE
    closed_stdout: bool = False
    full_stdout: bool = False
    leaves: tuple[str, ...] = ()
    needs_read_only: bool = False

    @property
    def marker(self) -> str | None:
        """What the case needs beyond the core (test/support/needs.py's marker): the nodes need ROS 2,
        the Rerun export its SDK (not for its --help). Where that is missing the case is
        skipped, not run: it would end at the one line saying so, and pass without testing
        what it names."""
        if self.script in ("ortf_recorder", "ortf_player", "ortf_scene_publisher"):
            return "ros"
        return "rerun" if self.args[:2] == ("export", "rerun") and "--help" not in self.args else None

    def available(self) -> bool:
        return self.marker is None or not needs.missing((needs.MARKER_ROOT[self.marker],))


def case(name: str, script: str, *args: str, **options: object) -> Case:
    needs_read_only = any("{ro}" in a for a in args)
    return Case(name, script, args, needs_read_only=needs_read_only, **options)  # type: ignore[arg-type]


def _numeric_cases() -> list[Case]:
    cases = []
    for value in NUMBERS:
        cases.append(case(f"bag2ortf-rate-{value}", "ortf-bag2ortf", "{bag}", "-o", "out", "--rate", value))
        cases.append(case(f"bag2ortf-jobs-{value}", "ortf-bag2ortf", "{bag}", "-o", "out", "--jobs", value))
        cases.append(case(f"demo-episodes-{value}", "ortf", "demo", "out", "--episodes", value, "--no-live"))
        cases.append(case(f"demo-seconds-{value}", "ortf", "demo", "out", "--seconds", value, "--no-live"))
        cases.append(case(f"demo-width-{value}", "ortf", "demo", "out", "--width", value, "--no-live"))
        cases.append(case(f"demo-height-{value}", "ortf", "demo", "out", "--height", value, "--no-live"))
    cases.append(case("bag2ortf-rate-word", "ortf-bag2ortf", "{bag}", "-o", "out", "--rate", "fast"))
    cases.append(case("bag2ortf-list-rate-negative", "ortf-bag2ortf", "{bag}", "--list", "--rate", "-5"))
    cases.append(case("bag2ortf-jobs-fraction", "ortf-bag2ortf", "{bag}", "-o", "out", "--jobs", "1.5"))
    cases.append(case("demo-width-odd", "ortf", "demo", "out", "--width", "17", "--no-live"))
    cases.append(
        case("demo-too-small-for-codes", "ortf", "demo", "out", "--width", "16", "--height", "16", "--no-live")
    )
    return cases


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """``ortf``'s commands as its parser has them: (), ("export",), ("export", "mcap")..."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommands(sub, (*path, name))


def _help_cases() -> list[Case]:
    """``--help`` of every command, its standard output a closed pipe and a full disk."""
    commands = [("ortf", *path) for path in _subcommands(build_parser())]
    cases = []
    for script, *path in [*commands, ("ortf-bag2ortf",), ("ortf_scene_publisher",)]:
        name = "-".join([script, *path])
        cases.append(case(f"{name}-help-closed-pipe", script, *path, "--help", code=PIPE_CLOSED, closed_stdout=True))
        cases.append(case(f"{name}-help-full-disk", script, *path, "--help", code=FAILED, full_stdout=True))
    return cases


def _link_loop_cases() -> list[Case]:
    """A loop of symbolic links (``ln -s loop loop``) wherever a path is given."""
    return [
        case("bag2ortf-input-loop", "ortf-bag2ortf", "{loop}", "-o", "out"),
        case("bag2ortf-inputs-from-loop", "ortf-bag2ortf", "--inputs-from", "{loop}", "-o", "out"),
        case("bag2ortf-inputs-from-naming-a-loop", "ortf-bag2ortf", "--inputs-from", "{loop_list}", "-o", "out"),
        case("bag2ortf-config-loop", "ortf-bag2ortf", "{bag}", "-o", "out", "--config", "{loop}"),
        case("bag2ortf-urdf-loop", "ortf-bag2ortf", "{bag}", "-o", "out", "--urdf", "{loop}"),
        case("bag2ortf-mesh-path-loop", "ortf-bag2ortf", "{bag}", "-o", "out", "--mesh-path", "{loop}"),
        case("bag2ortf-output-loop", "ortf-bag2ortf", "{bag}", "-o", "{loop}"),
        case("bag2ortf-output-in-loop", "ortf-bag2ortf", "{bag}", "-o", "{loop}/ds"),
        case("bag2ortf-write-config-loop", "ortf-bag2ortf", "{bag}", "--write-config", "{loop}"),
        case("mcap-write-config-loop", "ortf", "export", "mcap", "{dataset}", "o.mcap", "--write-config", "{loop}"),
        case("mcap-config-loop", "ortf", "export", "mcap", "{dataset}", "o.mcap", "--config", "{loop}"),
        *[case(f"{fmt}-out-loop", "ortf", "export", fmt, "{dataset}", "{loop}") for fmt in EXPORTS],
        *[case(f"{fmt}-source-loop", "ortf", "export", fmt, "{loop}", "out") for fmt in EXPORTS],
        case("import-out-loop", "ortf", "import", "lerobot", "{dataset}", "{loop}"),
        case("import-source-loop", "ortf", "import", "lerobot", "{loop}", "out"),
        case("validate-loop", "ortf", "validate", "{loop}"),
        case("info-loop", "ortf", "info", "{loop}"),
        case("recover-loop", "ortf", "recover", "{loop}"),
        case("demo-out-loop", "ortf", "demo", "{loop}", "--no-live"),
    ]


CASES: list[Case] = [
    *_numeric_cases(),
    *_help_cases(),
    *_link_loop_cases(),
    # ortf-bag2ortf: inputs
    case("bag2ortf-no-arguments", "ortf-bag2ortf"),
    case("bag2ortf-no-output", "ortf-bag2ortf", "{bag}"),
    case("bag2ortf-input-missing", "ortf-bag2ortf", "{missing}", "-o", "out"),
    case("bag2ortf-input-dash", "ortf-bag2ortf", "-", "-o", "out"),
    case("bag2ortf-input-dev-null", "ortf-bag2ortf", "/dev/null", "-o", "out"),
    case("bag2ortf-input-text-named-mcap", "ortf-bag2ortf", "{fake_mcap}", "-o", "out", code=FAILED),
    case("bag2ortf-input-empty-directory", "ortf-bag2ortf", "{empty_dir}", "-o", "out", code=USAGE),
    case("bag2ortf-second-input-missing", "ortf-bag2ortf", "{bag}", "{missing}", "-o", "out"),
    case("bag2ortf-inputs-from-missing", "ortf-bag2ortf", "--inputs-from", "{missing}", "-o", "out"),
    case("bag2ortf-inputs-from-binary", "ortf-bag2ortf", "--inputs-from", "{mcap_file}", "-o", "out"),
    case("bag2ortf-inputs-from-directory", "ortf-bag2ortf", "--inputs-from", "{empty_dir}", "-o", "out"),
    case("bag2ortf-ray-and-jobs", "ortf-bag2ortf", "{bag}", "-o", "out", "--ray", "--jobs", "2"),
    case("bag2ortf-ray-before-inputs", "ortf-bag2ortf", "-o", "out", "--ray", "{bag}"),
    case("bag2ortf-ray-address-malformed", "ortf-bag2ortf", "{bag}", "-o", "out", "--ray=nowhere"),
    case("bag2ortf-ray-nobody-there", "ortf-bag2ortf", "{bag}", "-o", "out", "--ray=127.0.0.1:1", code=FAILED),
    case("bag2ortf-config-missing", "ortf-bag2ortf", "{bag}", "-o", "out", "--config", "{missing}"),
    case("bag2ortf-config-directory", "ortf-bag2ortf", "{bag}", "-o", "out", "--config", "{empty_dir}"),
    case("bag2ortf-config-bad", "ortf-bag2ortf", "{bag}", "-o", "out", "--config", "{bad_mapping}", code=FAILED),
    case("bag2ortf-urdf-missing", "ortf-bag2ortf", "{bag}", "-o", "out", "--urdf", "/nonexistent.urdf"),
    case("bag2ortf-urdf-directory", "ortf-bag2ortf", "{bag}", "-o", "out", "--urdf", "{empty_dir}"),
    case("bag2ortf-urdf-binary", "ortf-bag2ortf", "{bag}", "-o", "out", "--urdf", "{mcap_file}", code=FAILED),
    case("bag2ortf-urdf-not-xml", "ortf-bag2ortf", "{bag}", "-o", "out", "--urdf", "{afile}", code=FAILED),
    case("bag2ortf-mesh-path-missing", "ortf-bag2ortf", "{bag}", "-o", "out", "--mesh-path", "{missing}"),
    case("bag2ortf-mesh-path-file", "ortf-bag2ortf", "{bag}", "-o", "out", "--mesh-path", "{afile}"),
    case("bag2ortf-task-empty", "ortf-bag2ortf", "{bag}", "-o", "out", "--task", ""),
    case("bag2ortf-task-blank", "ortf-bag2ortf", "{bag}", "-o", "out", "--task", "   "),
    case("bag2ortf-success-and-failure", "ortf-bag2ortf", "{bag}", "-o", "out", "--success", "--failure"),
    # ortf-bag2ortf: outputs
    case("bag2ortf-output-file", "ortf-bag2ortf", "{bag}", "-o", "{afile}"),
    case("bag2ortf-output-dash", "ortf-bag2ortf", "{bag}", "-o", "-"),
    case("bag2ortf-output-dev-stdout", "ortf-bag2ortf", "{bag}", "-o", "/dev/stdout"),
    case("bag2ortf-output-dev-null", "ortf-bag2ortf", "{bag}", "-o", "/dev/null"),
    case("bag2ortf-output-under-a-file", "ortf-bag2ortf", "{bag}", "-o", "{afile}/ds"),
    case("bag2ortf-output-read-only", "ortf-bag2ortf", "{bag}", "-o", "{ro}"),
    case("bag2ortf-output-in-read-only", "ortf-bag2ortf", "{bag}", "-o", "{ro}/ds"),
    case("bag2ortf-output-not-a-dataset", "ortf-bag2ortf", "{bag}", "-o", "{plain_dir}", code=FAILED),
    case("bag2ortf-write-config-directory", "ortf-bag2ortf", "{bag}", "--write-config", "{empty_dir}"),
    case("bag2ortf-write-config-read-only", "ortf-bag2ortf", "{bag}", "--write-config", "{ro}/m.yaml"),
    case("bag2ortf-write-config-under-a-file", "ortf-bag2ortf", "{bag}", "--write-config", "{afile}/m.yaml"),
    case("bag2ortf-list-closed-pipe", "ortf-bag2ortf", "{bag}", "--list", code=PIPE_CLOSED, closed_stdout=True),
    case(
        "bag2ortf-write-config-dash-closed-pipe",
        "ortf-bag2ortf",
        "{bag}",
        "--write-config",
        "-",
        code=PIPE_CLOSED,
        closed_stdout=True,
    ),
    # ortf validate / info / recover
    case("ortf-no-arguments", "ortf"),
    case("ortf-unknown-command", "ortf", "convert"),
    case("validate-missing", "ortf", "validate", "{missing}"),
    case("validate-file", "ortf", "validate", "{afile}"),
    case("validate-dash", "ortf", "validate", "-"),
    case("validate-dev-null", "ortf", "validate", "/dev/null"),
    case("validate-unknown-episode", "ortf", "validate", "{dataset}", "--episode", "000009"),
    case("validate-closed-pipe", "ortf", "validate", "{dataset}", code=PIPE_CLOSED, closed_stdout=True),
    case("info-missing", "ortf", "info", "{missing}"),
    case("info-file", "ortf", "info", "{afile}"),
    case("info-dev-stdout", "ortf", "info", "/dev/stdout"),
    case("info-not-a-dataset", "ortf", "info", "{empty_dir}", code=FAILED),
    case("info-read-only-not-a-dataset", "ortf", "info", "{ro}", code=FAILED),
    case("info-closed-pipe", "ortf", "info", "{dataset}", code=PIPE_CLOSED, closed_stdout=True),
    case("recover-missing", "ortf", "recover", "{missing}"),
    case("recover-file", "ortf", "recover", "{afile}"),
    case("recover-not-a-dataset", "ortf", "recover", "{empty_dir}", code=FAILED),
    case("recover-read-only-not-a-dataset", "ortf", "recover", "{ro}", code=FAILED),
    # ortf export mcap / rerun: an output file
    *[
        c
        for fmt, out in (("mcap", "out.mcap"), ("rerun", "out.rrd"))
        for c in (
            case(f"{fmt}-dataset-missing", "ortf", "export", fmt, "{missing}", out),
            case(f"{fmt}-dataset-file", "ortf", "export", fmt, "{afile}", out),
            case(f"{fmt}-not-a-dataset", "ortf", "export", fmt, "{empty_dir}", out, code=FAILED),
            case(f"{fmt}-out-exists", "ortf", "export", fmt, "{dataset}", "{afile}"),
            case(f"{fmt}-out-directory", "ortf", "export", fmt, "{dataset}", "{empty_dir}"),
            case(f"{fmt}-out-dash", "ortf", "export", fmt, "{dataset}", "-"),
            case(f"{fmt}-out-dev-stdout", "ortf", "export", fmt, "{dataset}", "/dev/stdout", "--force"),
            case(f"{fmt}-out-dev-null", "ortf", "export", fmt, "{dataset}", "/dev/null", "--force"),
            case(f"{fmt}-out-read-only", "ortf", "export", fmt, "{dataset}", f"{{ro}}/{out}"),
            case(f"{fmt}-unknown-episode", "ortf", "export", fmt, "{dataset}", out, "--episode", "9"),
            case(
                f"{fmt}-closed-pipe",
                "ortf",
                "export",
                fmt,
                "{dataset}",
                out,
                code=PIPE_CLOSED,
                closed_stdout=True,
                leaves=(out,),
            ),
        )
    ],
    case("mcap-image-format", "ortf", "export", "mcap", "{dataset}", "out.mcap", "--image-format", "png"),
    case("mcap-config-missing", "ortf", "export", "mcap", "{dataset}", "out.mcap", "--config", "{missing}"),
    case("mcap-write-config-directory", "ortf", "export", "mcap", "{dataset}", "out.mcap", "--write-config", "."),
    # ortf export lerobot / mixtrain / rlds, ortf import lerobot
    *[
        c
        for fmt in ("lerobot", "mixtrain", "rlds")
        for c in (
            case(f"{fmt}-source-missing", "ortf", "export", fmt, "{missing}", "out"),
            case(f"{fmt}-source-file", "ortf", "export", fmt, "{afile}", "out"),
            case(f"{fmt}-out-file", "ortf", "export", fmt, "{dataset}", "{afile}"),
            case(f"{fmt}-out-not-empty", "ortf", "export", fmt, "{dataset}", "{plain_dir}"),
            case(f"{fmt}-out-dash", "ortf", "export", fmt, "{dataset}", "-"),
            case(f"{fmt}-out-dev-null", "ortf", "export", fmt, "{dataset}", "/dev/null"),
            case(f"{fmt}-out-read-only", "ortf", "export", fmt, "{dataset}", "{ro}/out"),
        )
    ],
    case("lerobot-flavor", "ortf", "export", "lerobot", "{dataset}", "out", "--flavor", "openx"),
    case("import-source-missing", "ortf", "import", "lerobot", "{missing}", "out"),
    case("import-source-file", "ortf", "import", "lerobot", "{afile}", "out"),
    case("import-source-ortf", "ortf", "import", "lerobot", "{dataset}", "out", code=FAILED),
    case("import-out-read-only", "ortf", "import", "lerobot", "{dataset}", "{ro}/back"),
    case("import-out-file", "ortf", "import", "lerobot", "{dataset}", "{afile}"),
    # ortf demo
    case("demo-out-file", "ortf", "demo", "{afile}", "--no-live"),
    case("demo-out-file-force", "ortf", "demo", "{afile}", "--force", "--no-live"),
    case("demo-out-not-a-demo-force", "ortf", "demo", "{plain_dir}", "--force", "--no-live"),
    case("demo-out-dataset-force", "ortf", "demo", "{dataset}", "--force", "--no-live"),
    case("demo-out-with-the-users-files-force", "ortf", "demo", "{demo_like}", "--force", "--no-live"),
    case("demo-out-read-only", "ortf", "demo", "{ro}/demo", "--no-live"),
    case("demo-out-dash", "ortf", "demo", "-", "--no-live"),
    case("demo-out-dev-null-force", "ortf", "demo", "/dev/null", "--force", "--no-live"),
    # outputs that would overwrite an input, or land inside one
    case("bag2ortf-write-config-onto-the-input", "ortf-bag2ortf", "{mcap_file}", "--write-config", "{mcap_file}"),
    case("bag2ortf-write-config-into-the-bag", "ortf-bag2ortf", "{bag}", "--write-config", "{bag}/metadata.yaml"),
    case(
        "mcap-out-inside-the-dataset", "ortf", "export", "mcap", "{dataset}", "{dataset}/meta/manifest.json", "--force"
    ),
    case("mcap-write-config-onto-the-out", "ortf", "export", "mcap", "{dataset}", "o.mcap", "--write-config", "o.mcap"),
    # words that are no path, or not the path they look like
    case("bag2ortf-input-empty-word", "ortf-bag2ortf", "", "-o", "out"),
    case("bag2ortf-input-file-with-trailing-slash", "ortf-bag2ortf", "{mcap_file}/", "-o", "out"),
    case("bag2ortf-write-config-empty-word", "ortf-bag2ortf", "{bag}", "--write-config", ""),
    case("bag2ortf-write-config-trailing-slash", "ortf-bag2ortf", "{bag}", "--write-config", "m.yaml/"),
    case("bag2ortf-mesh-path-empty-word", "ortf-bag2ortf", "{bag}", "-o", "out", "--mesh-path", ""),
    case("bag2ortf-output-name-too-long", "ortf-bag2ortf", "{bag}", "-o", "a/" + "x" * 300 + "/ds"),
    case("mcap-out-trailing-slash", "ortf", "export", "mcap", "{dataset}", "o.mcap/"),
    case("demo-out-empty-word", "ortf", "demo", "", "--no-live"),
    case("bag2ortf-output-in-proc", "ortf-bag2ortf", "{bag}", "-o", "/proc/ortf-dataset"),
    # jobs that are separate, asked for together
    case("bag2ortf-list-and-write-config", "ortf-bag2ortf", "{bag}", "--list", "--write-config", "m.yaml"),
    case("bag2ortf-write-config-and-output", "ortf-bag2ortf", "{bag}", "--write-config", "m.yaml", "-o", "out"),
    # inputs that are not what they must be
    case("bag2ortf-urdf-empty", "ortf-bag2ortf", "{bag}", "-o", "out", "--urdf", "/dev/null", code=FAILED),
    case("bag2ortf-mapping-bad-writer", "ortf-bag2ortf", "{bag}", "-o", "out", "--config", "{bad_writer}", code=FAILED),
    case(
        "bag2ortf-mapping-unknown-frame", "ortf-bag2ortf", "{bag}", "-o", "out", "--config", "{bad_frame}", code=FAILED
    ),
    case("mcap-config-not-utf8", "ortf", "export", "mcap", "{dataset}", "o.mcap", "--config", "{binary}", code=FAILED),
    case("info-manifest-not-utf8", "ortf", "info", "{garbled}", code=FAILED),
    case("recover-manifest-not-utf8", "ortf", "recover", "{garbled}", code=FAILED),
    case("bag2ortf-append-to-garbled", "ortf-bag2ortf", "{bag}", "-o", "{garbled}", code=FAILED),
    case("lerobot-manifest-not-utf8", "ortf", "export", "lerobot", "{garbled}", "out", code=FAILED),
    # what a crashed writer left staged: refused, and the dataset as it was (no lock file left)
    case("recover-half-staged", "ortf", "recover", "{half_staged_1}", code=FAILED),
    case("recover-discard-half-staged", "ortf", "recover", "{half_staged_2}", "--discard", code=FAILED),
    case("recover-staged-header-a-directory", "ortf", "recover", "{header_a_directory}", code=FAILED),
    case("bag2ortf-append-to-half-staged", "ortf-bag2ortf", "{bag}", "-o", "{half_staged_3}", code=FAILED),
    case("bag2ortf-append-to-staged-by-another", "ortf-bag2ortf", "{bag}", "-o", "{staged_by_another}", code=FAILED),
    # the nodes' console scripts (parameters are checked before any DDS work)
    case("recorder-output-garbled-dataset", "ortf_recorder", "--ros-args", "-p", "output:={garbled}", code=FAILED),
    case("recorder-urdf-empty", "ortf_recorder", "--ros-args", "-p", "output:=ds", "-p", "urdf:=/dev/null"),
    case("recorder-no-output", "ortf_recorder"),
    case("recorder-output-file", "ortf_recorder", "--ros-args", "-p", "output:={afile}"),
    case("recorder-output-read-only", "ortf_recorder", "--ros-args", "-p", "output:={ro}/ds"),
    case("recorder-rate", "ortf_recorder", "--ros-args", "-p", "output:=ds", "-p", "step_rate_hz:=-5.0"),
    case("recorder-rate-inf", "ortf_recorder", "--ros-args", "-p", "output:=ds", "-p", "step_rate_hz:=.inf"),
    case("recorder-queue", "ortf_recorder", "--ros-args", "-p", "output:=ds", "-p", "queue_frames:=0"),
    case("recorder-mapping-missing", "ortf_recorder", "--ros-args", "-p", "output:=ds", "-p", "mapping:={missing}"),
    case("recorder-params-file-missing", "ortf_recorder", "--ros-args", "--params-file", "{missing}"),
    case("recorder-bad-ros-args", "ortf_recorder", "--ros-args", "-p", "output"),
    case("player-no-dataset", "ortf_player"),
    case("player-dataset-missing", "ortf_player", "--ros-args", "-p", "dataset:={missing}"),
    case("player-dataset-file", "ortf_player", "--ros-args", "-p", "dataset:={afile}"),
    case("player-rate", "ortf_player", "--ros-args", "-p", "dataset:={dataset}", "-p", "rate:=-1.0"),
    case(
        "player-lookahead", "ortf_player", "--ros-args", "-p", "dataset:={dataset}", "-p", "lookahead_frames:=99999999"
    ),
    case("player-unknown-episode", "ortf_player", "--ros-args", "-p", "dataset:={dataset}", "-p", "episodes:=['9']"),
]


@dataclass
class World:
    """The shared inputs every case may name, and what they looked like before."""

    root: Path
    paths: dict[str, str]
    read_only: bool
    before: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float
    case_dir_after: dict[str, tuple[int, int]]


def snapshot(root: Path, skip: str | None = None) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time (directories' too)."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if skip is not None and relative.parts[0] == skip:
            continue
        info = path.lstat()
        found[str(relative)] = (info.st_size if not path.is_dir() else 0, info.st_mtime_ns)
    return found


def _make_read_only(directory: Path) -> bool:
    """``directory`` made unwritable: by its mode, or (as root, whom modes do not stop) by
    the immutable attribute. Whether that worked."""
    directory.chmod(0o555)
    if not os.access(directory, os.W_OK):
        return True
    if shutil.which("chattr"):
        subprocess.run(["chattr", "+i", str(directory)], capture_output=True, check=False)
    return not os.access(directory, os.W_OK)


def _undo_read_only(directory: Path) -> None:
    if shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(directory)], capture_output=True, check=False)
    directory.chmod(0o755)


STAGED_HEADERS = {
    "half_staged_1": '{"episode_ind',  # cut off as it was written
    "half_staged_2": '{"episode_ind',
    "half_staged_3": '{"episode_ind',
    "header_a_directory": None,
    "staged_by_another": json.dumps(
        {"episode_index": 9, "episode_id": "000009", "task": "pick", "recorded_at": "2024-01-01T00:00:00Z"}
    ),
}
"""Datasets with an episode staged, by the header it has (None: a directory where it should
be). Each in a directory of its own, for its case alone: a lock file one case makes and
removes again would change the times of the directory another case looks at."""


def _staged_copies(dataset: Path, inputs: Path) -> dict[str, str]:
    """``dataset`` copied with ``.staging/episode_000009`` for each of ``STAGED_HEADERS``; their paths."""
    paths = {}
    for name, header in STAGED_HEADERS.items():
        copy = inputs / name / "dataset"
        shutil.copytree(dataset, copy)
        staged = copy / ".staging" / "episode_000009"
        staged.mkdir(parents=True)
        if header is None:
            (staged / "episode.json").mkdir()
        else:
            (staged / "episode.json").write_text(header)
        paths[name] = str(copy)
    return paths


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("bad-invocations")
    inputs = root / "inputs"
    inputs.mkdir()
    bag = write_teleop_bag(inputs / "teleop", "mcap", duration_s=1.0, width=64, height=48).path
    dataset = inputs / "dataset"
    assert bag2ortf([str(bag), "-o", str(dataset), "--json"]) == 0
    afile = inputs / "afile.txt"
    afile.write_text("a file, not a directory\n")
    fake_mcap = inputs / "notes.mcap"
    fake_mcap.write_text("not an MCAP file\n")
    bad_mapping = inputs / "bad.yaml"
    bad_mapping.write_text("step: {rate_hz: -5}\n")
    empty_dir = inputs / "empty"
    empty_dir.mkdir()
    plain_dir = inputs / "plain"
    plain_dir.mkdir()
    (plain_dir / "notes.txt").write_text("someone's files\n")
    (inputs / "bad-writer.yaml").write_text("writer: {video: {preset: turbo}}\n")
    with BagSource(bag) as source:  # the detected mapping, naming a frame the recording lacks
        write_mapping(
            replace(detect_mapping(source.topics()), end_effector_frame="no_such_frame"), inputs / "bad-frame.yaml"
        )
    demo_like = inputs / "demo-like"  # an earlier demo's output, with a file of the user's in it
    (demo_like / "dataset").mkdir(parents=True)
    (demo_like / "mapping.yaml").write_text("{}\n")
    (demo_like / ".ortf-demo").write_text(MARKER_TEXT)
    (demo_like / "my-notes.txt").write_text("mine\n")
    (inputs / "binary.yaml").write_bytes(b"# caf\xe9\n")
    garbled = inputs / "garbled"
    (garbled / "meta").mkdir(parents=True)
    (garbled / "meta" / "manifest.json").write_bytes(b"\x89PNG\xff")
    loop = inputs / "loop"
    loop.symlink_to(loop.name)  # `ln -s loop loop`
    (inputs / "loop-list.txt").write_text(f"{loop}\n")
    ro = inputs / "read-only"
    ro.mkdir()
    read_only = _make_read_only(ro)
    paths = {
        "bag": str(bag),
        "mcap_file": str(next(bag.glob("*.mcap"))),
        "dataset": str(dataset),
        "afile": str(afile),
        "fake_mcap": str(fake_mcap),
        "bad_mapping": str(bad_mapping),
        "empty_dir": str(empty_dir),
        "plain_dir": str(plain_dir),
        "ro": str(ro),
        "missing": str(inputs / "missing"),
        "bad_writer": str(inputs / "bad-writer.yaml"),
        "bad_frame": str(inputs / "bad-frame.yaml"),
        "binary": str(inputs / "binary.yaml"),
        "garbled": str(garbled),
        "demo_like": str(demo_like),
        "loop": str(loop),
        "loop_list": str(inputs / "loop-list.txt"),
        **_staged_copies(dataset, inputs),
    }
    world = World(root, paths, read_only)
    world.before = snapshot(root, skip="cases")
    try:
        yield world
    finally:
        _undo_read_only(ro)


def _run(world: World, case: Case) -> Outcome:
    cwd = world.root / "cases" / case.name
    cwd.mkdir(parents=True)
    command = [str(BIN / case.script), *(arg.format(**world.paths) for arg in case.args)]
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    stdout: int = subprocess.PIPE
    if case.closed_stdout:
        closed_read_end, stdout = os.pipe()
        os.close(closed_read_end)
    elif case.full_stdout:
        stdout = os.open("/dev/full", os.O_WRONLY)
    started = time.monotonic()
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=environment,
            stdout=stdout,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
        )
        code: int | None = done.returncode
        out, err = (done.stdout or b"").decode(errors="replace"), done.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        code, out, err = None, "", (exc.stderr or b"").decode(errors="replace")
    finally:
        if stdout != subprocess.PIPE:
            os.close(stdout)
    return Outcome(code, out, err, time.monotonic() - started, snapshot(cwd))


@pytest.fixture(scope="module")
def outcomes(world: World, request: pytest.FixtureRequest) -> dict[str, Outcome]:
    """Every case selected (``-k``; all when none is) run, four at a time (each mostly
    waits for its interpreter to start)."""
    mine = [item for item in request.session.items if getattr(item, "module", None) is request.module]
    params = [getattr(item, "callspec", None) for item in mine]  # (other modules have a "case" too)
    selected = {spec.params["case"].name for spec in params if spec is not None and "case" in spec.params}
    runnable = [
        c
        for c in CASES
        if (world.read_only or not c.needs_read_only) and c.available() and (not selected or c.name in selected)
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip((c.name for c in runnable), pool.map(lambda c: _run(world, c), runnable), strict=True))


def test_the_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.timeout(900)  # the first case's setup runs all ~200 of them (``outcomes``), 4 at a time
@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=[getattr(pytest.mark, c.marker)] if c.marker else [], id=c.name) for c in CASES]
)
def test_a_bad_invocation_is_one_line_and_an_exit_code(world: World, outcomes: dict[str, Outcome], case: Case) -> None:
    if case.needs_read_only and not world.read_only:
        pytest.skip("no way to make a directory read-only here")
    outcome = outcomes[case.name]
    assert outcome.code is not None, f"hung: no exit within {TIMEOUT_S} s"
    assert "Traceback" not in outcome.stderr, outcome.stderr
    lines = outcome.stderr.splitlines()
    if case.closed_stdout:
        assert lines == [], outcome.stderr  # quiet, as `git log | head` is
    else:
        assert len(lines) == 1, outcome.stderr
    if case.full_stdout:
        assert lines[0].endswith(": standard output: No space left on device"), outcome.stderr
    assert outcome.code == case.code, outcome.stderr
    assert sorted(outcome.case_dir_after) == sorted(case.leaves), "left behind"


def test_the_inputs_are_as_they_were(world: World, outcomes: dict[str, Outcome]) -> None:
    """No case touched what it was given: no replaced file, no removed directory, no
    lock or scratch directory left in a dataset."""
    assert outcomes
    assert snapshot(world.root, skip="cases") == world.before


def _script(name: str) -> str:
    return str(BIN / name)


def test_sigterm_stops_a_conversion_and_leaves_no_dataset(tmp_path: Path) -> None:
    """``timeout``, a job scheduler or a closed terminal stop a conversion as Ctrl-C does:
    exit 128 + the signal, and the dataset it was making (no episode yet) is removed."""
    bag = write_teleop_bag(tmp_path / "long", "mcap", duration_s=20.0, width=64, height=48).path
    out = tmp_path / "out"
    child = subprocess.Popen([_script("ortf-bag2ortf"), str(bag), "-o", str(out)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (out / "meta").exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=TIMEOUT_S)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert b"Traceback" not in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["long"]


def test_a_full_standard_output_is_one_line_naming_it(world: World) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [_script("ortf"), "info", world.paths["dataset"]], stdout=full, stderr=subprocess.PIPE, timeout=TIMEOUT_S
        )
    err = done.stderr.decode()
    assert done.returncode == FAILED and err.splitlines() == ["ortf info: standard output: No space left on device"]


def test_recover_clears_an_episode_that_never_got_its_header(world: World, tmp_path: Path) -> None:
    """A writer that died (or found the disk full) between making an episode's directory
    and writing its header left nothing to recover: recover removes it, and the dataset
    takes episodes again."""
    dataset = tmp_path / "ds"
    shutil.copytree(world.paths["dataset"], dataset)
    (dataset / ".staging" / "episode_000009").mkdir(parents=True)
    done = subprocess.run([_script("ortf"), "recover", str(dataset)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "episode 000009: discarded (nothing recorded)" in done.stdout
    assert not list((dataset / ".staging").glob("episode_*"))
    assert bag2ortf([world.paths["bag"], "-o", str(dataset)]) == 0
