"""ortf_ros.ros' shared plumbing with real rclpy in this process: QoS adapted to what
publishers offer (rosbag2's rule), typed and free-form parameters from the command line
and a params file, stop signals, the spinning thread and the orderly close.

conftest.py keeps DDS on loopback, in a domain of this test run's own.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.utilities import ok, try_shutdown
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String

from ortf_ros.qos import Durability, Reliability, adapt_to_offers
from ortf_ros.ros import runtime
from ortf_ros.ros.parameters import declare_parameters, given_parameters
from ortf_ros.ros.qos import subscription_qos
from ortf_ros.ros.sim_clock import SimClock

GRAPH_TIMEOUT_S = 10.0
_TOPIC_NUMBERS = itertools.count()


def fresh_topic(what: str) -> str:
    """A topic no earlier test used: a destroyed node's publisher may linger in the graph
    until its departure is discovered."""
    return f"/ortf_test/{what}_{next(_TOPIC_NUMBERS)}"


# -- adapt_to_offers: the rule alone -------------------------------------------------------

RELIABLE_LATCHED: tuple[Reliability, Durability] = ("reliable", "transient_local")
RELIABLE_VOLATILE: tuple[Reliability, Durability] = ("reliable", "volatile")
BEST_EFFORT_VOLATILE: tuple[Reliability, Durability] = ("best_effort", "volatile")
BEST_EFFORT_LATCHED: tuple[Reliability, Durability] = ("best_effort", "transient_local")


@pytest.mark.parametrize(
    ("offers", "latched", "expected"),
    [
        ([], False, ("reliable", "volatile")),  # nobody yet: what ROS publishes with
        ([], True, ("reliable", "transient_local")),
        ([RELIABLE_VOLATILE], False, ("reliable", "volatile")),
        ([BEST_EFFORT_VOLATILE], False, ("best_effort", "volatile")),  # a camera driver's sensor QoS
        ([RELIABLE_VOLATILE, BEST_EFFORT_VOLATILE], False, ("best_effort", "volatile")),  # one weak: all weak
        ([RELIABLE_LATCHED], True, ("reliable", "transient_local")),  # /robot_description
        ([RELIABLE_LATCHED], False, ("reliable", "volatile")),  # history only for latched topics
        ([RELIABLE_LATCHED, RELIABLE_VOLATILE], True, ("reliable", "volatile")),
        ([BEST_EFFORT_LATCHED, RELIABLE_LATCHED], True, ("best_effort", "transient_local")),
    ],
)
def test_adapt_to_offers_requests_what_every_publisher_offers(
    offers: list[tuple[Reliability, Durability]], latched: bool, expected: tuple[str, str]
) -> None:
    assert adapt_to_offers(offers, latched=latched) == expected


def test_adapt_to_offers_overrides_win_policy_by_policy() -> None:
    offers = [BEST_EFFORT_VOLATILE]
    assert adapt_to_offers(offers, latched=True, reliability="reliable") == ("reliable", "volatile")
    assert adapt_to_offers(offers, latched=False, durability="transient_local") == ("best_effort", "transient_local")
    assert adapt_to_offers([], latched=True, reliability="best_effort", durability="volatile") == BEST_EFFORT_VOLATILE


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"reliability": "Reliable"}, "reliability 'Reliable': expected one of 'auto', 'reliable', 'best_effort'"),
        ({"durability": "latched"}, "durability 'latched': expected one of 'auto', 'volatile', 'transient_local'"),
    ],
)
def test_adapt_to_offers_refuses_unknown_policies(override: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        adapt_to_offers([], latched=False, **override)


# -- real nodes ----------------------------------------------------------------------------


@pytest.fixture
def context() -> Iterator[Context]:
    """A context of the test's own: nodes made with the command-line arguments they need,
    and nothing left behind for the other rclpy tests of this process."""
    own = Context()
    rclpy.init(context=own)
    yield own
    rclpy.shutdown(context=own)


@pytest.fixture
def make_node(context: Context) -> Iterator[Callable[..., Node]]:
    nodes: list[Node] = []

    def make(name: str, *ros_args: str, **options: object) -> Node:
        cli_args = ["--ros-args", *ros_args] if ros_args else None
        node = Node(name, context=context, cli_args=cli_args, **options)  # type: ignore[arg-type]
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.destroy_node()  # type: ignore[no-untyped-call]


def profile(reliability: ReliabilityPolicy, durability: DurabilityPolicy, depth: int = 1) -> QoSProfile:
    return QoSProfile(depth=depth, reliability=reliability, durability=durability)  # type: ignore[no-untyped-call]


def keep_data(kept: list[str]) -> Callable[[String], None]:
    return lambda message: kept.append(message.data)


def wait_for_publishers(node: Node, topic: str, count: int) -> None:
    """Until ``node``'s view of the graph shows ``count`` publishers on ``topic``."""
    deadline = time.monotonic() + GRAPH_TIMEOUT_S
    while node.count_publishers(topic) != count:
        assert time.monotonic() < deadline, f"{topic}: {node.count_publishers(topic)} publishers, not {count}"
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("offered", "latched", "expected"),
    [
        ([], True, (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)),
        (
            [(ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.VOLATILE)],
            False,
            (ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.VOLATILE),
        ),
        (
            [(ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)],
            True,
            (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL),
        ),
        (
            [
                (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL),
                (ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.TRANSIENT_LOCAL),
            ],
            True,
            (ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.TRANSIENT_LOCAL),
        ),
        (
            [
                (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL),
                (ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE),
            ],
            True,
            (ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE),
        ),
    ],
    ids=["no-publisher", "best-effort", "transient-local", "one-best-effort", "one-volatile"],
)
def test_subscription_qos_adapts_to_the_publishers_in_the_graph(
    make_node: Callable[..., Node],
    offered: list[tuple[ReliabilityPolicy, DurabilityPolicy]],
    latched: bool,
    expected: tuple[ReliabilityPolicy, DurabilityPolicy],
) -> None:
    topic = fresh_topic("adapted")
    for index, (reliability, durability) in enumerate(offered):
        make_node(f"publisher_{index}").create_publisher(String, topic, profile(reliability, durability))
    recorder = make_node("recorder")
    wait_for_publishers(recorder, topic, len(offered))
    qos = subscription_qos(recorder, topic, latched=latched, depth=7)
    assert (qos.reliability, qos.durability) == expected
    assert (qos.history, qos.depth) == (HistoryPolicy.KEEP_LAST, 7)


def test_subscription_qos_overrides_and_refuses_unknown_policies(make_node: Callable[..., Node]) -> None:
    topic = fresh_topic("overridden")
    make_node("camera").create_publisher(
        String, topic, profile(ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.VOLATILE)
    )
    recorder = make_node("recorder")
    wait_for_publishers(recorder, topic, 1)
    qos = subscription_qos(recorder, topic, latched=True, depth=1, durability="transient_local")
    assert (qos.reliability, qos.durability) == (ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.TRANSIENT_LOCAL)
    with pytest.raises(ValueError, match="reliability 'sometimes'"):
        subscription_qos(recorder, topic, latched=False, depth=1, reliability="sometimes")


def test_adapted_subscriptions_hear_a_best_effort_camera_and_a_latched_description(
    context: Context, make_node: Callable[..., Node]
) -> None:
    """What the rule is for: a reliable request would never match the best-effort publisher,
    and a volatile one would miss the description published before it subscribed."""
    camera_topic, description_topic = fresh_topic("camera"), fresh_topic("robot_description")
    publisher_node = make_node("robot")
    camera = publisher_node.create_publisher(
        String, camera_topic, profile(ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.VOLATILE, depth=10)
    )
    description = publisher_node.create_publisher(
        String, description_topic, profile(ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)
    )
    description.publish(String(data="<robot name='arm'/>"))
    recorder = make_node("recorder")
    received: dict[str, list[str]] = {"camera": [], "description": []}
    for topic, latched, kept in (
        (camera_topic, False, received["camera"]),
        (description_topic, True, received["description"]),
    ):
        wait_for_publishers(recorder, topic, 1)
        qos = subscription_qos(recorder, topic, latched=latched, depth=10)
        recorder.create_subscription(String, topic, keep_data(kept), qos)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(recorder)
    deadline = time.monotonic() + GRAPH_TIMEOUT_S
    while not (received["camera"] and received["description"]):
        assert time.monotonic() < deadline, received
        camera.publish(String(data="frame"))
        executor.spin_once(timeout_sec=0.05)
    executor.shutdown()
    assert received["description"] == ["<robot name='arm'/>"]
    assert set(received["camera"]) == {"frame"}


def test_sim_clock_gives_each_arrival_the_clock_that_had_arrived_before_it(make_node: Callable[..., Node]) -> None:
    """Receive times under use_sim_time: read whenever (a drain pass late, a backlog), an
    arrival's time is the /clock that had arrived before it, not the latest."""
    clock = SimClock(make_node("ortf_test_sim_clock"))
    publisher = make_node("ortf_test_clock_source").create_publisher(Clock, "/clock", 10)
    assert clock.now() == 0 and clock.at(time.time_ns()) == 0  # (no /clock yet: none)
    after = []
    for second in (1000, 1001, 1002):
        message = Clock()
        message.clock.sec = second
        deadline = time.monotonic() + GRAPH_TIMEOUT_S
        while clock.now() != second * 1_000_000_000:  # (again until the subscription is matched)
            assert time.monotonic() < deadline, f"/clock {second} never arrived"
            publisher.publish(message)
            time.sleep(0.01)
        after.append(time.time_ns())
    assert [clock.at(t) // 1_000_000_000 for t in after] == [1000, 1001, 1002]
    assert clock.at(0) == 1000 * 1_000_000_000  # (before every /clock kept: the oldest)


# -- parameters ----------------------------------------------------------------------------

DEFAULTS: dict[str, object] = {
    "dataset": "",
    "episodes": (),
    "streams": ("tf", "joint_states"),
    "rate": 1.0,
    "loop": False,
}


class CallerSettingsError(Exception):
    """The caller's own error class, as the player passes SettingsError."""


@pytest.mark.parametrize("automatic", [False, True], ids=["declared-only", "overrides-declared"])
def test_declare_parameters_types_the_table_and_takes_the_given_values(
    make_node: Callable[..., Node], automatic: bool
) -> None:
    node = make_node(
        "player",
        *("-p", "dataset:=/data/x", "-p", "episodes:=['3', '5']", "-p", "rate:=2.5"),
        automatically_declare_parameters_from_overrides=automatic,
    )
    values = declare_parameters(node, DEFAULTS, CallerSettingsError)
    assert values == {
        "dataset": "/data/x",
        "episodes": ["3", "5"],
        "streams": ["tf", "joint_states"],
        "rate": 2.5,
        "loop": False,
    }
    described = node.describe_parameters(["rate", "episodes"])
    assert [d.description for d in described] == ["double, default 1.0", "string array, default ()"]
    assert isinstance(described[0], ParameterDescriptor)


def test_declare_parameters_reads_an_unset_string_array_as_an_empty_tuple(make_node: Callable[..., Node]) -> None:
    assert declare_parameters(make_node("player"), {"episodes": ()}, CallerSettingsError) == {"episodes": ()}


@pytest.mark.parametrize("automatic", [False, True], ids=["declared-only", "overrides-declared"])
@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("rate:=2", "parameter rate: expected a double (write it with a decimal point): "),
        ("loop:=sometimes", "parameter loop: expected a bool: "),
        ("episodes:=3", "parameter episodes: expected a string array: "),
    ],
)
def test_declare_parameters_refuses_a_wrong_type_with_the_callers_error(
    make_node: Callable[..., Node], automatic: bool, given: str, message: str
) -> None:
    node = make_node("player", "-p", given, automatically_declare_parameters_from_overrides=automatic)
    with pytest.raises(CallerSettingsError) as error:
        declare_parameters(node, DEFAULTS, CallerSettingsError)
    assert str(error.value).startswith(message), error.value


def test_given_parameters_are_the_command_lines_under_the_prefixes(make_node: Callable[..., Node]) -> None:
    node = make_node(
        "recorder",
        *("-p", "cameras.wrist.topic:=/x", "-p", "cameras.wrist.kind:=rgb", "-p", "step.rate_hz:=30.0"),
        *("-p", "joints.names:=[a, b]", "-p", "cameras_extra:=1", "-p", "output:=/data/out"),
        automatically_declare_parameters_from_overrides=True,
    )
    typed = declare_parameters(node, {"output": ""}, CallerSettingsError)
    assert typed == {"output": "/data/out"}
    assert given_parameters(node, ["cameras", "step", "joints"]) == {
        "cameras.wrist.topic": "/x",
        "cameras.wrist.kind": "rgb",
        "step.rate_hz": 30.0,
        "joints.names": ["a", "b"],
    }
    assert given_parameters(node, ["cameras.wrist.topic"]) == {"cameras.wrist.topic": "/x"}
    assert given_parameters(node, []) == {}
    # What the recorder does with them: mapping_from_parameters nests the dotted names.
    from ortf_ros.pipeline.mapping import mapping_from_parameters

    (camera,) = mapping_from_parameters(given_parameters(node, ["cameras", "step"]), "node recorder").cameras
    assert (camera.name, camera.topic, camera.kind) == ("wrist", "/x", "rgb")


def test_given_parameters_from_a_params_file(make_node: Callable[..., Node], tmp_path: Path) -> None:
    params = tmp_path / "recorder.yaml"
    params.write_text(
        "/**:\n"
        "  ros__parameters:\n"
        "    cameras:\n"
        "      wrist_camera: {topic: /wrist_camera/image_raw, kind: rgb}\n"
        "      depth_camera: {topic: /depth_camera/image_raw, kind: depth}\n"
        "    wrenches:\n"
        "      ft_sensor: {topic: /ft_sensor/wrench, range_force: [-50.0, 50.0]}\n"
    )
    node = make_node(
        "recorder",
        "--params-file",
        str(params),
        "-p",
        "cameras.wrist_camera.topic:=/moved",  # the command line wins, as everywhere in ROS
        automatically_declare_parameters_from_overrides=True,
    )
    assert given_parameters(node, ["cameras", "wrenches"]) == {
        "cameras.wrist_camera.topic": "/moved",
        "cameras.wrist_camera.kind": "rgb",
        "cameras.depth_camera.topic": "/depth_camera/image_raw",
        "cameras.depth_camera.kind": "depth",
        "wrenches.ft_sensor.topic": "/ft_sensor/wrench",
        "wrenches.ft_sensor.range_force": [-50.0, 50.0],
    }


def test_given_parameters_needs_the_overrides_declared(make_node: Callable[..., Node]) -> None:
    """Documented, and pinned here: rclpy shows a node no override it has not declared."""
    assert given_parameters(make_node("recorder", "-p", "cameras.wrist.topic:=/x"), ["cameras"]) == {}


# -- runtime -------------------------------------------------------------------------------


@pytest.fixture
def restored_signal_handlers() -> Iterator[None]:
    saved = {stop: signal.getsignal(stop) for stop in runtime.STOP_SIGNALS}
    yield
    for stop, handler in saved.items():
        signal.signal(stop, handler)


@pytest.mark.parametrize("stop", runtime.STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_stop_signals_raise_keyboard_interrupt(restored_signal_handlers: None, stop: signal.Signals) -> None:
    runtime.install_stop_signals()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), stop)  # a signal sent to itself is handled before os.kill returns


def test_init_spin_in_thread_and_close(restored_signal_handlers: None) -> None:
    """The default context, as the nodes' main() uses it: initialised without rclpy's
    handlers, spun in a named thread, and after close nothing is left running."""
    runtime.init(["--ros-args", "-p", "answer:=42"])
    try:
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        node = Node("ortf_test_runtime", automatically_declare_parameters_from_overrides=True)
        assert node.get_parameter("answer").value == 42  # init's args reached the context
        ticked = threading.Event()
        node.create_timer(0.01, ticked.set)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spinner = runtime.spin_in_thread(executor, "ortf_test spinner")
        assert spinner.name == "ortf_test spinner" and spinner.daemon
        assert ticked.wait(GRAPH_TIMEOUT_S), "the executor does not spin"
        runtime.close(node, executor, spinner)
        assert not spinner.is_alive() and not ok()
    finally:
        try_shutdown()


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(5)  # a handler that raises does so before this ends


def test_only_the_first_stop_signal_interrupts_a_later_one_is_ignored() -> None:
    """A Ctrl-C reaches a node twice under ``ros2 launch``: the second must not be raised into
    the shutdown the first began (it cut the recorder's commit on shutdown short, a traceback)."""
    saved = {stop: signal.getsignal(stop) for stop in runtime.STOP_SIGNALS}
    try:
        runtime.install_stop_signals()
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGINT)
        assert all(signal.getsignal(stop) is signal.SIG_IGN for stop in runtime.STOP_SIGNALS)
        os.kill(os.getpid(), signal.SIGINT)  # the second one, during the shutdown
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # delivered by now, and nothing raised
    finally:
        for stop, handler in saved.items():
            signal.signal(stop, handler)
