"""ROS parameters in two shapes: a table of typed settings, and free-form namespaces.

A node's settings are a table of dotted names and defaults whose Python types are the
parameter types (``playback.settings.PARAMETERS``). ``declare_parameters`` declares
each with that type, so ``ros2 param describe`` shows it and a value of the wrong type
(``rate:=2`` for a double) is one error line instead of a node that runs with it.

A topic mapping (``cameras.<key>.topic``, ``joints.names``...) cannot be declared in
advance: its names depend on the robot. rclpy only lets a node see the parameters it
has declared, so such a node is created with
``automatically_declare_parameters_from_overrides=True`` (every ``-p`` and params-file
entry is declared, with the type of its value) and ``given_parameters`` collects the
ones under the namespaces it reads. ``declare_parameters`` still types the table's own
names on such a node.
"""

from __future__ import annotations

import array
from collections.abc import Callable, Mapping, Sequence

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException
from rclpy.node import Node
from rclpy.parameter import Parameter


def parameter_type(default: object) -> Parameter.Type:
    """The ROS type of a setting whose default is ``default``; an empty tuple is a string array
    (the only array the tables hold, and the one type an empty default cannot show)."""
    if isinstance(default, tuple) and not default:
        return Parameter.Type.STRING_ARRAY
    kind: Parameter.Type = Parameter.Type.from_parameter_value(default)  # type: ignore[no-untyped-call]
    return kind


def type_name(kind: Parameter.Type) -> str:
    """``double``, ``string array``...: the words ``ros2 param`` uses, for error lines."""
    return kind.name.lower().replace("_", " ")


def declare_parameters(
    node: Node, defaults: Mapping[str, object], error: Callable[[str], Exception]
) -> dict[str, object]:
    """Declare every name of ``defaults`` on ``node`` with the type of its default; return
    the values given (``--ros-args -p``, a params file), the defaults for the rest.

    A tuple default is declared as a list (rclpy's array value), an empty one as a string
    array; an unset string array reads back as ``()``. A value of the wrong type raises
    ``error("parameter NAME: expected a TYPE: ...")``, the caller's own exception class,
    so the node reports it like its other setting errors.
    """
    values: dict[str, object] = {}
    for name, default in defaults.items():
        kind = parameter_type(default)
        descriptor = ParameterDescriptor(description=f"{type_name(kind)}, default {default!r}")
        if node.has_parameter(name):
            # Declared from its override by automatically_declare_parameters_from_overrides,
            # with whatever type the value had: declared again with the table's type, which
            # takes the same override and refuses it if the type is wrong.
            node.undeclare_parameter(name)
        try:
            if isinstance(default, tuple) and not default:
                value = node.declare_parameter(name, kind, descriptor).value
            else:
                initial = list(default) if isinstance(default, tuple) else default
                value = node.declare_parameter(name, initial, descriptor).value
        except InvalidParameterTypeException as exc:
            hint = " (write it with a decimal point)" if kind == Parameter.Type.DOUBLE else ""
            raise error(f"parameter {name}: expected a {type_name(kind)}{hint}: {exc.args[0]}") from None
        values[name] = () if value is None else value
    return values


def given_parameters(node: Node, prefixes: Sequence[str]) -> dict[str, object]:
    """The parameters of ``node`` under the namespaces ``prefixes`` (``"cameras"`` takes
    ``cameras`` and ``cameras.wrist.topic``, not ``cameras_extra``), by full dotted name.

    ``node`` must have been created with ``automatically_declare_parameters_from_overrides=True``:
    rclpy keeps the command line's and params file's values away from a node until they
    are declared, so without it nothing is found. Arrays come back as lists, whatever
    container rclpy holds them in, as a YAML mapping would have them.
    """
    found: dict[str, object] = {}
    for prefix in prefixes:  # (get_parameters_by_prefix, not list_parameters: Humble has no Node.list_parameters)
        if node.has_parameter(prefix):
            found[prefix] = _plain(node.get_parameter(prefix).value)
        for name in node.get_parameters_by_prefix(prefix):  # (its values are typed wrongly in Jazzy's stubs)
            found[f"{prefix}.{name}"] = _plain(node.get_parameter(f"{prefix}.{name}").value)
    return found


def _plain(value: object) -> object:
    return list(value) if isinstance(value, (list, tuple, array.array)) else value
