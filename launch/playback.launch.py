"""Plays an ORTF dataset as ROS 2 topics.

    ros2 launch ortf_ros playback.launch.py dataset:=/path/to/dataset [rate:=2.0] [loop:=true]
        [use_sim_time:=true] [config:=my_playback.yaml]

Every player parameter comes from the `config` file (default: the installed
config/playback.yaml, which documents them). `rate`, `loop` and `use_sim_time` override
it only when given: left empty, the file's values hold, so a copied and edited config
is never silently overridden by a default written here.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

# Launch arguments that override the config file when not empty, with their ROS types
# (launch's own YAML guessing would turn rate:=2 into an integer, which a double
# parameter refuses).
OPTIONAL_OVERRIDES: dict[str, type] = {"rate": float, "loop": bool, "use_sim_time": bool}


def player(context: LaunchContext) -> list[Node]:
    overrides: dict[str, ParameterValue] = {
        "dataset": ParameterValue(LaunchConfiguration("dataset"), value_type=str),
    }
    for name, value_type in OPTIONAL_OVERRIDES.items():
        if LaunchConfiguration(name).perform(context):
            overrides[name] = ParameterValue(LaunchConfiguration(name), value_type=value_type)
    return [
        Node(
            package="ortf_ros",
            executable="ortf_player",
            name="ortf_player",
            output="screen",
            emulate_tty=True,
            parameters=[LaunchConfiguration("config"), overrides],
        )
    ]


def generate_launch_description() -> LaunchDescription:
    default_config = os.path.join(get_package_share_directory("ortf_ros"), "config", "playback.yaml")
    return LaunchDescription(
        [
            DeclareLaunchArgument("dataset", description="ORTF dataset directory to play (required)"),
            DeclareLaunchArgument(
                "config", default_value=default_config, description="player parameter file (ros__parameters)"
            ),
            DeclareLaunchArgument(
                "rate",
                default_value="",
                description="speed: 1.0 real time, 0.0 as fast as possible (empty: the config's)",
            ),
            DeclareLaunchArgument(
                "loop", default_value="", description="start over after the last episode (empty: the config's)"
            ),
            DeclareLaunchArgument(
                "use_sim_time",
                default_value="",
                description="node clock from /clock, ROS's own parameter (empty: the config's)",
            ),
            OpaqueFunction(function=player),
        ]
    )
