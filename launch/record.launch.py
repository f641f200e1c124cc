"""Records ROS 2 topics live into an ORTF dataset.

    ros2 launch ortf_ros record.launch.py output:=/data/my_task [mapping:=mapping.yaml]
        [use_sim_time:=true] [config:=my_record.yaml]

Every recorder parameter comes from the `config` file (default: the installed
config/record.yaml, which documents them). `output`, `mapping` and `use_sim_time`
override it only when given: left empty, the file's values hold, so a copied and edited
config is never silently overridden by a default written here. Episodes are started and
stopped with the node's services (/ortf_recorder/start_episode, stop_episode, ...).
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
# (launch's own YAML guessing would turn a numeric-looking path into a number).
OPTIONAL_OVERRIDES: dict[str, type] = {"output": str, "mapping": str, "use_sim_time": bool}


def recorder(context: LaunchContext) -> list[Node]:
    overrides: dict[str, ParameterValue] = {}
    for name, value_type in OPTIONAL_OVERRIDES.items():
        if LaunchConfiguration(name).perform(context):
            overrides[name] = ParameterValue(LaunchConfiguration(name), value_type=value_type)
    return [
        Node(
            package="ortf_ros",
            executable="ortf_recorder",
            name="ortf_recorder",
            output="screen",
            emulate_tty=True,
            # SIGINT from `ros2 launch` (Ctrl-C) commits the open episode: give the last
            # commit time before launch escalates to SIGTERM.
            sigterm_timeout="60",
            parameters=[LaunchConfiguration("config"), overrides],
        )
    ]


def generate_launch_description() -> LaunchDescription:
    default_config = os.path.join(get_package_share_directory("ortf_ros"), "config", "record.yaml")
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "output", default_value="", description="dataset directory to record into (empty: the config's)"
            ),
            DeclareLaunchArgument(
                "config", default_value=default_config, description="recorder parameter file (ros__parameters)"
            ),
            DeclareLaunchArgument(
                "mapping",
                default_value="",
                description="topic mapping file, as ortf-bag2ortf --write-config writes it (empty: the config's)",
            ),
            DeclareLaunchArgument(
                "use_sim_time",
                default_value="",
                description="node clock from /clock, ROS's own parameter (empty: the config's)",
            ),
            OpaqueFunction(function=recorder),
        ]
    )
