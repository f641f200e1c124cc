"""``ortf_recorder``: ROS 2 topics recorded live into ORTF episodes, driven by services.

    ortf_recorder --ros-args --params-file config/record.yaml -p output:=/data/pick_place \\
        [-p mapping:=mapping.yaml] [-p task:="Pick up the red box"]
    ros2 launch ortf_ros record.launch.py output:=/data/pick_place [mapping:=mapping.yaml]

The pipeline is the bag converter's (``pipeline.recorder.LiveRecorder`` drives the same
prologue, description and episode session); this module only connects it to ROS:

- parameters (``recorder_settings``; config/record.yaml documents them), the mapping
  from a file, from parameters, or detected from the graph;
- data subscriptions on a node of their own, drained by a thread of their own
  (``subscriptions.Receiver``: no executor), so a service call or a commit never delays
  them, and the pipeline knows up to when it has everything;
- services ``~/start_episode``, ``~/stop_episode`` (commit), ``~/discard_episode``
  (std_srvs/Trigger) and ``~/set_success`` (std_srvs/SetBool); topics ``~/task``,
  ``~/failure_reason`` and ``~/operator_notes`` (std_msgs/String), also settable as
  parameters (``ros2 param set``);
- health at ``status_period_s``: ``~/status`` (std_msgs/String, JSON) and
  ``/diagnostics`` (diagnostic_msgs/DiagnosticArray): state, episode, elapsed, per
  stream received / rate / dropped / late, queue depths, latency.

SIGINT / SIGTERM: the open episode is committed (``on_shutdown: discard`` drops it),
files closed, exit 0. A parameter, mapping or output it cannot start with: one error
line, exit 1; a failure while recording (a full disk): the error, exit 1, with every
episode committed before intact and the open one left for ``ortf recover``.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Header, String
from std_srvs.srv import SetBool, Trigger

from ortf_ros.errors import OrtfError, SettingsError
from ortf_ros.io.no_pandas import keep_pandas_out
from ortf_ros.pipeline.flow import LIVE
from ortf_ros.pipeline.mapping import MAPPING_KEYS, TopicMapping, describe_mapping
from ortf_ros.pipeline.recorder import (
    SHUTDOWN_TIMEOUT_S,
    LiveRecorder,
    check_output,
    live_writer_config,
)
from ortf_ros.pipeline.recording.state import Labels, RecorderSettings, Reply
from ortf_ros.pipeline.sources.bag import TopicInfo
from ortf_ros.pipeline.sources.live import LiveSource
from ortf_ros.ros import runtime
from ortf_ros.ros.parameters import declare_parameters, given_parameters
from ortf_ros.ros.recorder_settings import (
    NODE_NAME,
    PARAMETERS,
    QOS_NAMESPACE,
    RecorderParameters,
    detected_mapping,
    mapped_types,
    mapping_from,
    qos_overrides,
    read_urdf,
    recorder_parameters,
)
from ortf_ros.ros.sim_clock import SimClock
from ortf_ros.ros.subscriptions import Receiver

LABEL_PARAMETERS = ("task", "failure_reason", "operator_notes")


class RecorderNode(Node):
    """Parameters, services, status; the data subscriptions live on ``data_node``."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME, automatically_declare_parameters_from_overrides=True)
        self.log = self.get_logger()  # type: ignore[no-untyped-call]
        values = declare_parameters(self, PARAMETERS, SettingsError)
        self.parameters: RecorderParameters = recorder_parameters(values)
        p = self.parameters
        check_output(p.output)
        self.sim_time = bool(self.get_parameter("use_sim_time").value)
        mapping_values = given_parameters(self, MAPPING_KEYS)
        self.qos_overrides = qos_overrides(given_parameters(self, [QOS_NAMESPACE]))
        mapping = mapping_from(p.mapping_file, mapping_values)
        self.mapping = mapping if mapping is not None else self._detect_mapping()
        if self.mapping.episodes.mode != "input":
            self.log.warning("the mapping's episodes section is for bags: live episodes begin and end on the services")
        urdf = read_urdf(p.urdf_file) if p.urdf_file is not None else None
        flow = replace(
            LIVE, flush_every_ms=p.flush_every_ms, queue_messages=p.queue_messages, queue_frames=p.queue_frames
        )
        if p.task:
            self.mapping = replace(self.mapping, labels=replace(self.mapping.labels, task=p.task))
        settings = RecorderSettings(
            output=p.output,
            mapping=self.mapping,
            writer=live_writer_config(self.mapping),
            flow=flow,
            warmup_s=p.warmup_s,
            urdf=urdf,
            urdf_source=f"the urdf parameter ({p.urdf_file})",
        )
        # The data subscriptions live on a node of their own, drained by a thread of their own
        # (``Receiver``): no executor, so a service call or a commit never delays them. It
        # takes no global arguments (a __node remap would give it this node's name); this
        # node's remapping rules are applied to its topics instead (``resolve``). Under sim
        # time it also takes /clock, the one clock of receive times and commands alike.
        self.data_node = Node(f"_{NODE_NAME}_data", namespace=self.get_namespace(), use_global_arguments=False)
        self.sim_clock = SimClock(self.data_node) if self.sim_time else None
        self.source = LiveSource(NODE_NAME, flow, self._now_ns)
        self.recorder = LiveRecorder(settings, self.source, log=self._log, published=self._published)
        labels = self.mapping.labels  # (the mapping's labels are every episode's defaults, as in a conversion)
        self.recorder.default_labels = Labels(labels.success, labels.failure_reason, labels.operator_notes)
        self.recorder.labels = replace(
            self.recorder.default_labels,
            failure_reason=p.failure_reason or labels.failure_reason,
            operator_notes=p.operator_notes or labels.operator_notes,
        )
        self.receiver = Receiver(
            self.data_node,
            self.source,
            mapped_types(self.mapping),
            latched={*self.mapping.tf_static_topics, self.mapping.robot_description_topic},
            # (a point cloud is megabytes, as a frame is: it gets a frame's queue, not 1024 messages)
            frames={c.topic for c in self.mapping.cameras} | {p.topic for p in self.mapping.point_clouds},
            qos_overrides=self.qos_overrides,
            sim_clock=self.sim_clock,
            now=self._now_ns,
            warn=self.log.warning,
            resolve=self.resolve_topic_name,
        )
        self._serve()
        self.log.info(f"recording into {p.output}; mapping:\n  " + "\n  ".join(describe_mapping(self.mapping, None)))

    def _published(self, topic: str) -> bool:
        return self.count_publishers(topic) > 0

    def _now_ns(self) -> int:
        """The receive clock now: wall time, or under sim time the latest /clock (the node's
        own clock where none has been taken yet)."""
        if self.sim_clock is None:
            return time.time_ns()
        return self.sim_clock.now() or self.get_clock().now().nanoseconds

    def _log(self, level: str, text: str) -> None:
        # (one call site per severity: rclpy refuses a call site whose severity changes)
        if level == "error":
            self.log.error(text)
        elif level == "warn":
            self.log.warning(text)
        else:
            self.log.info(text)

    def _detect_mapping(self) -> TopicMapping:
        """The mapping ``ortf-bag2ortf`` would detect, from the topics the graph has after
        ``discovery_s`` (until the list stops growing, at most twice that)."""
        p = self.parameters
        deadline = time.monotonic() + 2 * p.discovery_s
        seen: list[tuple[str, list[str]]] = []
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            now = sorted(self.get_topic_names_and_types())
            if now != seen:
                seen, stable_since = now, time.monotonic()
            elif time.monotonic() - stable_since >= p.discovery_s:
                break
            time.sleep(0.1)
        topics = [
            TopicInfo(topic, msgtype, msgtype, 1, None, None, "", "", "cdr")
            for topic, types in seen
            for msgtype in types
        ]
        return detected_mapping(topics, p.step_rate_hz, p.discovery_s)

    # -- services, topics, parameters -------------------------------------------

    def _serve(self) -> None:
        recorder = self.recorder
        commands = MutuallyExclusiveCallbackGroup()  # type: ignore[no-untyped-call]  # (services wait for the pipeline)
        health = MutuallyExclusiveCallbackGroup()  # type: ignore[no-untyped-call]  # (status, labels go on meanwhile)
        for name, action in (
            ("start_episode", lambda: recorder.start()),
            ("stop_episode", recorder.stop),
            ("discard_episode", recorder.discard),
        ):
            self.create_service(Trigger, f"~/{name}", self._trigger(name, action), callback_group=commands)
        self.create_service(SetBool, "~/set_success", self._set_success, callback_group=commands)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)  # type: ignore[no-untyped-call]
        for topic, setter in (
            ("~/task", recorder.set_task),
            ("~/failure_reason", recorder.set_failure_reason),
            ("~/operator_notes", recorder.set_operator_notes),
        ):
            self.create_subscription(String, topic, self._label(topic, setter), reliable, callback_group=health)
        self.add_on_set_parameters_callback(self._parameters_set)
        latched = QoSProfile(  # type: ignore[no-untyped-call]
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.status_publisher = self.create_publisher(String, "~/status", latched)
        self.diagnostics_publisher = self.create_publisher(DiagnosticArray, "/diagnostics", reliable)
        self.create_timer(self.parameters.status_period_s, self.publish_status, callback_group=health)

    def _trigger(self, name: str, action: Callable[[], Reply]) -> Callable[[Any, Any], Any]:
        def serve(request: Any, response: Any) -> Any:
            reply = action()
            if reply.success:
                self.log.info(f"{name}: {reply.message}")
            else:
                self.log.warning(f"{name}: {reply.message}")
            response.success, response.message = reply.success, reply.message
            self.publish_status()
            return response

        return serve

    def _set_success(self, request: Any, response: Any) -> Any:
        reply = self.recorder.set_success(bool(request.data))
        response.success, response.message = reply.success, reply.message
        return response

    def _label(self, topic: str, setter: Callable[[str], Reply]) -> Callable[[String], None]:
        def take(message: String) -> None:
            reply = setter(message.data)
            if not reply.success:
                self.log.warning(f"{topic}: {reply.message}")

        return take

    def _parameters_set(self, parameters: list[Parameter]) -> SetParametersResult:
        """``ros2 param set`` of the task and labels goes to the recorder; the rest is read at start-up only."""
        setters = {
            "task": self.recorder.set_task,
            "failure_reason": self.recorder.set_failure_reason,
            "operator_notes": self.recorder.set_operator_notes,
        }
        for parameter in parameters:
            setter = setters.get(parameter.name)
            if setter is None:
                continue
            if not isinstance(parameter.value, str):
                return SetParametersResult(successful=False, reason=f"{parameter.name}: expected a string")
            reply = setter(parameter.value)  # ("" clears a label; the task refuses it)
            if not reply.success:
                return SetParametersResult(successful=False, reason=reply.message)
        return SetParametersResult(successful=True)

    # -- health -----------------------------------------------------------------

    def publish_status(self) -> None:
        status = self.recorder.status()
        status["unsubscribed"] = self.receiver.missing()
        problems = self.receiver.problem_lines()
        if problems:
            status["problems"] = problems
        self.status_publisher.publish(String(data=json.dumps(status)))
        self.diagnostics_publisher.publish(diagnostics(status, self.get_clock().now().to_msg(), self.get_name()))


def diagnostics(status: dict[str, Any], stamp: Any, name: str) -> DiagnosticArray:
    """The status as ``/diagnostics``: one entry for the recorder, one per stream."""
    state = status["state"]
    warned = bool(status.get("warnings") or status.get("problems"))
    level = DiagnosticStatus.ERROR if state == "failed" else DiagnosticStatus.WARN if warned else DiagnosticStatus.OK
    episode = status.get("episode") or {}
    summary = status.get("error") or (f"recording episode {episode['id']}" if episode else state)
    values = {"state": state, "episodes_committed": status["episodes_committed"], "output": status["output"]}
    values.update({f"episode_{k}": v for k, v in episode.items() if k != "latency_ms"})
    for quantile, value in (episode.get("latency_ms") or {}).items():
        values[f"latency_{quantile}_ms"] = value
    entries = [_status(level, f"{name}: recorder", str(summary), values, name)]
    for topic, stream in status["streams"].items():
        losses = stream["dropped"] + stream["lost_in_transport"]
        stream_level = DiagnosticStatus.WARN if losses or stream["stale"] else DiagnosticStatus.OK
        words = "stale" if stream["stale"] else f"{stream['rate_hz']:g} Hz"
        if stream["dropped"]:
            words += f", {stream['dropped']} dropped"
        if stream["lost_in_transport"]:
            words += f", {stream['lost_in_transport']} lost in transport"
        message = words
        entries.append(_status(stream_level, f"{name}: {topic}", message, stream, name))
    return DiagnosticArray(header=Header(stamp=stamp), status=entries)


def _status(level: bytes, title: str, message: str, values: dict[str, Any], hardware: str) -> DiagnosticStatus:
    return DiagnosticStatus(
        level=level,
        name=title,
        message=message,
        hardware_id=hardware,
        values=[KeyValue(key=str(k), value=str(v)) for k, v in values.items()],
    )


def main(args: Sequence[str] | None = None) -> int:
    keep_pandas_out()  # (before the node's first Arrow array: a long-lived process, 35 MB less)
    node = runtime.start(NODE_NAME, args, RecorderNode, (OrtfError, OSError, ValueError), interrupt_exits=True)
    if isinstance(node, int):
        return node
    # Two threads: a service handler waits for the pipeline (a commit takes a while) while
    # the status timer and the label topics go on in the other group.
    services = MultiThreadedExecutor(num_threads=2)
    services.add_node(node)
    pipeline = threading.Thread(target=node.recorder.run, name="ortf_recorder pipeline", daemon=True)
    pipeline.start()
    receiving = threading.Event()
    receiver = threading.Thread(target=node.receiver.run, args=(receiving,), name="ortf_recorder receiver", daemon=True)
    receiver.start()
    service_spinner = runtime.spin_in_thread(services, "ortf_recorder services")
    try:
        while node.recorder.state != "failed" and pipeline.is_alive() and receiver.is_alive():
            time.sleep(0.1)
        if node.receiver.failure is not None:
            node.log.error(node.receiver.failure)
    except KeyboardInterrupt:
        pass
    # From here on the episode is being committed: a second Ctrl-C, or launch's SIGTERM,
    # must not cut that short (SIGKILL still does, and `ortf recover` finishes the episode).
    for stop in runtime.STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    try:
        reply = node.recorder.shutdown(commit=node.parameters.commit_on_shutdown)
        node.log.info(f"stopped: {reply.message}")
        pipeline.join(timeout=SHUTDOWN_TIMEOUT_S)
    finally:
        receiving.set()
        receiver.join()
        node.data_node.destroy_node()  # type: ignore[no-untyped-call]
        node.publish_status()
        runtime.close(node, services, service_spinner)
    failed = node.recorder.state == "failed" or node.receiver.failure is not None or pipeline.is_alive()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
