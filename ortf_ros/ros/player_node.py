"""``ortf_player``: an ORTF dataset published as ROS 2 topics.

    ortf_player --ros-args --params-file config/playback.yaml -p dataset:=/path/to/dataset

Parameters are declared with their types from ``playback.settings.PARAMETERS``
(documented in config/playback.yaml); a wrong type or value, a dataset that cannot be
played (not a dataset, fails validation, a video missing, an unknown episode) is one
error line and exit code 1. The messages are built without ROS by ``playback.messages``
(so ``ortf export mcap`` writes the same bytes) and scheduled by ``playback.player``;
this node creates a publisher per topic (with the real message classes, publishing the
serialized CDR), ``/clock`` when ``publish_clock`` is set, and:

- services ``~/pause``, ``~/resume``, ``~/step`` (one step while paused) and
  ``~/next_episode`` (std_srvs/Trigger);
- ``~/status`` (std_msgs/String, JSON: state, episode, step, time, rate, achieved_rate),
  twice a second and on every change.

The node exits 0 when everything is published (not with ``loop``) or on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from builtin_interfaces.msg import Time
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.publisher import Publisher
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String
from std_srvs.srv import Trigger

from ortf_ros.errors import OrtfError, SettingsError, UsageError
from ortf_ros.format.units import NS
from ortf_ros.io import paths
from ortf_ros.playback.messages import Outgoing, Playlist
from ortf_ros.playback.player import Player
from ortf_ros.playback.selection import open_for_playback
from ortf_ros.playback.settings import NODE_NAME, PARAMETERS, settings_from_parameters
from ortf_ros.qos import QosSettings
from ortf_ros.ros import runtime
from ortf_ros.ros.message_types import message_class
from ortf_ros.ros.parameters import declare_parameters
from ortf_ros.ros.qos import qos_profile

STATUS_PERIOD_S = 0.5
DELIVERY_TIMEOUT_S = 2.0  # at the end, how long reliable subscribers get to acknowledge
SWITCH_INTERVAL_S = 0.0005  # GIL hand-over: the publishing thread must not wait 5 ms for the decoder's


class PlayerNode(Node):
    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        self.log = self.get_logger()  # type: ignore[no-untyped-call]
        # The node's parameters are its command line: what is wrong with them is a usage error.
        self.settings = settings_from_parameters(
            declare_parameters(self, PARAMETERS, SettingsError), f"node {NODE_NAME}"
        )
        if not self.settings.dataset:
            raise UsageError("parameter dataset: required: the directory of the dataset to play")
        try:
            paths.input_dir(self.settings.dataset, "an ORTF dataset directory")
        except UsageError as exc:
            raise UsageError(f"parameter dataset: {exc}") from None
        dataset, episodes = open_for_playback(self.settings.dataset, self.settings.episodes)
        self.playlist = Playlist(dataset, episodes, self.settings.messages, self.log.warning)
        self.player = Player(self.playlist, self.settings, self)
        messages = self.settings.messages
        self.publishers_by_topic: dict[str, Publisher] = {
            topic: self.create_publisher(message_class(msgtype), topic, qos_profile(messages.qos[kind]))
            for topic, (kind, msgtype) in self.playlist.publication.topics().items()
        }
        reliable = qos_profile(QosSettings(10, "reliable", "volatile"))
        self.clock_publisher = self.create_publisher(Clock, "/clock", reliable) if self.settings.publish_clock else None
        self.status_publisher = self.create_publisher(String, "~/status", reliable)
        for name, action in (
            ("pause", self._pause),
            ("resume", self._resume),
            ("step", self._step),
            ("next_episode", self._next_episode),
        ):
            self.create_service(Trigger, f"~/{name}", action)
        self.create_timer(STATUS_PERIOD_S, self.publish_status)
        self._describe(dataset.root, episodes)

    def _describe(self, root: object, episodes: Sequence[str]) -> None:
        s = self.settings
        rate = "as fast as possible" if s.rate == 0 else f"at {s.rate:g}x"
        extras = [w for w, on in (("looping", s.loop), ("paused", s.start_paused), ("/clock", s.publish_clock)) if on]
        self.log.info(
            f"playing {len(episodes)} episode(s) of {root} {rate}, {s.stamps} stamps"
            + (f" ({', '.join(extras)})" if extras else "")
        )
        missing = self.playlist.publication.unpublished_frames
        if missing:
            self.log.info(f"dynamic TF frames the dataset has no poses of (not published): {missing}")
        without_info = self.playlist.publication.without_info_line()
        if without_info is not None:
            self.log.info(without_info)

    # -- Sink

    def publish(self, item: Outgoing, data: bytes) -> None:
        self.publishers_by_topic[item.topic].publish(data)

    def clock(self, stamp_ns: int) -> None:
        if self.clock_publisher is not None:
            sec, nanosec = divmod(stamp_ns, NS)
            self.clock_publisher.publish(Clock(clock=Time(sec=sec, nanosec=nanosec)))

    # -- status and services

    def publish_status(self) -> None:
        self.status_publisher.publish(String(data=json.dumps(self.player.status().to_dict())))

    def _answer(self, response: Any, success: bool, message: str) -> Any:
        response.success, response.message = success, message
        self.publish_status()
        return response

    def _pause(self, request: Any, response: Any) -> Any:
        done = self.player.pause()
        return self._answer(response, done, "paused" if done else "not playing")

    def _resume(self, request: Any, response: Any) -> Any:
        done = self.player.resume()
        return self._answer(response, done, "playing" if done else "not paused")

    def _step(self, request: Any, response: Any) -> Any:
        published = self.player.step()
        return self._answer(response, published is not None, published or "not paused, or nothing left to play")

    def _next_episode(self, request: Any, response: Any) -> Any:
        done = self.player.next_episode()
        return self._answer(response, done, "skipping to the next episode" if done else "nothing to skip")

    def wait_for_delivery(self) -> None:
        for publisher in [*self.publishers_by_topic.values(), self.status_publisher]:
            publisher.wait_for_all_acked(Duration(seconds=DELIVERY_TIMEOUT_S))


def main(args: Sequence[str] | None = None) -> int:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # Ctrl-C and SIGTERM reach the publishing loop as KeyboardInterrupt, which stops it
    # cleanly (runtime: rclpy's own handler would invalidate the context under a publish).
    node = runtime.start(NODE_NAME, args, PlayerNode, (OrtfError, OSError))
    if isinstance(node, int):
        return node
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = runtime.spin_in_thread(executor, "ortf_player services")
    code = 0
    try:
        node.player.run()
        node.publish_status()
        node.wait_for_delivery()
        node.log.info("finished")
    except (KeyboardInterrupt, ExternalShutdownException):
        node.log.info("stopped")
    except OrtfError as exc:
        node.log.error(str(exc))
        code = 1
    finally:
        node.player.stop()
        runtime.close(node, executor, spinner)
    return code


if __name__ == "__main__":
    sys.exit(main())
