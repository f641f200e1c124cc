"""This package in a colcon workspace, built and sourced the way ROS users do it.

Shared by test_colcon (runs the installed player) and test_launch_files (checks that
the launch files name what the install space really has).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "ortf_ros"
PLAYER_NODE = "ortf_player"
# The parameter file launch/playback.launch.py gives the player, and so the one
# test_colcon starts the installed player with (test_launch_files holds them together).
PLAYER_PARAMS = "config/playback.yaml"
RECORDER_NODE = "ortf_recorder"
# The parameter file launch/record.launch.py gives the recorder, and so the one
# test_recorder_node starts the installed recorder with.
RECORDER_PARAMS = "config/record.yaml"


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def install(self) -> Path:
        return self.root / "install"

    @property
    def prefix(self) -> Path:
        """The package's own install prefix (colcon's default isolated layout)."""
        return self.install / PACKAGE

    @property
    def executables(self) -> Path:
        """Where `ros2 run` looks for the package's executables."""
        return self.prefix / "lib" / PACKAGE

    @property
    def share(self) -> Path:
        return self.prefix / "share" / PACKAGE

    def sourced_environment(self) -> dict[str, str]:
        """The environment after `. install/local_setup.sh`, on top of this process's."""
        result = subprocess.run(
            ["sh", "-c", '. "$1/local_setup.sh" && env -0', "sh", str(self.install)],
            env=dict(os.environ),
            capture_output=True,
            check=True,
        )
        return dict(entry.split("=", 1) for entry in result.stdout.decode().split("\0") if "=" in entry)


def build_workspace(root: Path) -> Workspace:
    """`colcon build` of a workspace whose src/ links to this repository.

    colcon runs in this interpreter (scripts/setup-env.sh installs it, or finds the
    sourced ROS install's), so it builds with the python that has rclpy and the
    project's dependencies, as a ROS user's colcon builds with the distribution's.
    """
    source = root / "src" / PACKAGE
    source.parent.mkdir(parents=True)
    source.symlink_to(REPO, target_is_directory=True)
    colcon = [
        sys.executable,
        "-c",
        "import sys; from colcon_core.command import main; sys.exit(main(argv=sys.argv[1:]))",
    ]
    result = subprocess.run(
        [*colcon, "build", "--event-handlers", "console_direct+"],
        cwd=root,
        env=dict(os.environ),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"colcon build failed:\n{result.stdout}\n{result.stderr}"
    return Workspace(root)
