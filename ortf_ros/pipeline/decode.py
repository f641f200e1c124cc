"""Decode: serialized bytes -> message objects, one typestore for bags and live subscriptions.

A ``Decoder`` holds two rosbags typestores: ROS 2 Jazzy for CDR (rosbag2, MCAP, rclpy raw
subscriptions) and ROS 1 Noetic for ROS 1 ``.bag`` payloads. Types a recording brings
along (custom messages, other distributions) are added with ``register``; a bag's own
definition describes its bytes, so it replaces a built-in one that differs.

Type names are normalised to the ROS 2 form ``pkg/msg/Type``: ROS 1 ``pkg/Type`` and the
legacy ROS 2 ``pkg/Type`` (old ``.db3`` files without ``/msg/``) alike. The legacy ROS 1
``tf/tfMessage`` has the layout of ``tf2_msgs/TFMessage`` and decodes like it.

``decode`` never raises on bad input: truncated or corrupt bytes and unknown types come
back as a ``BadMessage`` whose reason names the topic and the type, for the caller to
count per topic. A ``Decoder`` keeps one definition per type name, so use one per source
when sources might define the same custom type differently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rosbags.interfaces import Nodetype
from rosbags.typesys import Stores, TypesysError, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from ortf_ros.pipeline.samples import BadMessage, DefinitionFormat, RawMessage, Serialization
from ortf_ros.pipeline.streams import audio_definitions

if TYPE_CHECKING:
    from rosbags.interfaces.typing import Typesdict

LEGACY_ALIASES: dict[str, str] = {"tf/msg/tfMessage": "tf2_msgs/msg/TFMessage"}
"""Retired type names and the current type with the same fields."""

_TFMESSAGE_DEFINITION = "geometry_msgs/TransformStamped[] transforms\n"


def _controller_state_msg(points: tuple[str, ...], multi_dof: bool) -> str:
    """``control_msgs/JointTrajectoryControllerState`` with these JointTrajectoryPoint
    fields, and (since Humble) as many MultiDOFJointTrajectoryPoint ones."""
    text = "std_msgs/Header header\nstring[] joint_names\n"
    text += "".join(f"trajectory_msgs/JointTrajectoryPoint {point}\n" for point in points)
    if multi_dof:
        text += "string[] multi_dof_joint_names\n"
        text += "".join(f"trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_{point}\n" for point in points)
    return text


_NEW_POINTS = ("reference", "feedback", "error", "output")  # (control_msgs 5; backported to Humble's 4)
_OLD_POINTS = ("desired", "actual", "error")
KNOWN_LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "control_msgs/msg/JointTrajectoryControllerState": (
        (
            "ROS 2 Humble's (reference, feedback and the deprecated desired, actual)",
            _controller_state_msg((*_NEW_POINTS, "desired", "actual"), multi_dof=True),
        ),
        ("ROS 2 Humble's first (desired, actual, multi-DOF)", _controller_state_msg(_OLD_POINTS, multi_dof=True)),
        ("ROS 2 Foxy's and Galactic's (desired, actual)", _controller_state_msg(_OLD_POINTS, multi_dof=False)),
        ("ROS 2 Iron's and Jazzy's (reference, feedback)", _controller_state_msg(_NEW_POINTS, multi_dof=True)),
    ),
    # (not in ROS 2 Jazzy; a live recorder's subscription brings no definition either)
    "foxglove_msgs/msg/CompressedVideo": (
        (
            "foxglove_msgs' (timestamp, frame_id, data, format)",
            "builtin_interfaces/Time timestamp\nstring frame_id\nuint8[] data\nstring format\n",
        ),
    ),
}
KNOWN_LAYOUTS |= audio_definitions.known_layouts()
"""ROS 2 types the Jazzy store lacks that recordings carry without a definition (rosbag2
sqlite3 files before Iron hold none): the layouts they had upstream (a label, the ``.msg``
text). CDR holds no field names, so each is tried on a message until one reads its bytes
to the end (a wrong one runs out of bytes or leaves some over), and that one is kept."""
_IDL_SEPARATOR = "=" * 80 + "\n"


def ros2_typestore() -> Typestore:
    """A new ROS 2 Jazzy typestore: what CDR is decoded with here and what the player encodes with.

    A new one each time, because ``Decoder.register`` changes its store.
    """
    return get_typestore(Stores.ROS2_JAZZY)


def normalize_msgtype(name: str) -> str:
    """``pkg/Type`` -> ``pkg/msg/Type``; ``pkg/msg/Type`` (and ``pkg/srv/...``) unchanged."""
    parts = [part for part in name.strip().split("/") if part]
    if len(parts) == 2:
        return f"{parts[0]}/msg/{parts[1]}"
    return "/".join(parts)


def canonical_msgtype(name: str) -> str:
    """The normalised name, with legacy aliases resolved (``tf/tfMessage`` -> ``tf2_msgs/msg/TFMessage``)."""
    normalized = normalize_msgtype(name)
    return LEGACY_ALIASES.get(normalized, normalized)


def _parse_definition(msgtype: str, msgdef: str, fmt: DefinitionFormat) -> Typesdict:
    if fmt == "ros2idl":
        typs: Typesdict = {}
        if msgdef.startswith(_IDL_SEPARATOR + "IDL: "):
            # rosbag2 concatenates the IDL of a type and of its dependencies.
            for part in msgdef.split(_IDL_SEPARATOR)[1:]:
                _, _, idl = part.partition("\n")
                typs.update(get_types_from_idl(idl))
        else:
            typs.update(get_types_from_idl(msgdef))
        return typs
    return get_types_from_msg(msgdef, msgtype)


def _one_line(exc: Exception, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _referenced(typs: Typesdict) -> set[str]:
    """Names of the message types the fields of ``typs`` refer to."""
    names: set[str] = set()
    for _, fields in typs.values():
        for _, (kind, desc) in fields:
            if kind == Nodetype.NAME:
                names.add(str(desc))
            elif kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
                (inner_kind, inner), _ = cast("tuple[tuple[Nodetype, object], int]", desc)
                if inner_kind == Nodetype.NAME:
                    names.add(str(inner))
    return names


class Decoder:
    """Turns ``RawMessage`` bytes into rosbags message objects (CDR or ROS 1 serialization)."""

    def __init__(self) -> None:
        self._stores: dict[str, Typestore] = {"cdr": ros2_typestore()}  # ROS 1's: see ``_store``
        self._definition_errors: dict[tuple[str, str], str] = {}
        self._resolved: dict[tuple[str, str], str | None] = {}
        self._jazzy_fielddefs = dict(self._stores["cdr"].fielddefs)
        self._jazzy_layout: dict[str, bool] = {}
        self._layout_stores: dict[str, Typestore] = {}  # (``KNOWN_LAYOUTS``) label -> a store with that layout
        self.guessed: dict[str, str] = {}
        """Types decoded with a layout of ``KNOWN_LAYOUTS`` (the recording brought no
        definition) -> which one, for the summary to say."""

    def _store(self, serialization: str) -> Typestore | None:
        """The store of a serialization (None: unknown). ROS 1's is made when first needed:
        building it costs about a tenth of a second, which a ROS 2 recording need not pay."""
        store = self._stores.get(serialization)
        if store is None and serialization == "ros1":
            store = self._stores["ros1"] = get_typestore(Stores.ROS1_NOETIC)
            # Noetic's store lacks tf2_msgs/TFMessage, which ROS 1 bags carry on /tf_static; the
            # legacy tf/tfMessage resolves to it through LEGACY_ALIASES.
            store.register(get_types_from_msg(_TFMESSAGE_DEFINITION, "tf2_msgs/msg/TFMessage"))
        return store

    def register(self, msgtype: str, msgdef: str, format: DefinitionFormat) -> None:
        """Learn ``msgtype`` (and the types its definition embeds) from a recording.

        ``format`` says whose definition it is: ``ros1msg`` goes to the ROS 1 store,
        ``ros2msg``/``ros2idl`` to the CDR one. Where the store already holds a different
        definition under the same name, the recording's wins. A definition that cannot
        be parsed is remembered, and messages of that type then decode to a
        ``BadMessage`` that says why (unless the store knows the type anyway).
        """
        name = normalize_msgtype(msgtype)
        serialization = "ros1" if format == "ros1msg" else "cdr"
        store = self._store(serialization)
        assert store is not None
        try:
            typs = _parse_definition(name, msgdef, format)
        except Exception as exc:  # the definition is untrusted text from the file
            self._definition_errors[(serialization, name)] = f"its {format} definition does not parse: {_one_line(exc)}"
            return
        undefined = sorted(_referenced(typs) - typs.keys() - store.fielddefs.keys())
        if undefined:
            self._definition_errors[(serialization, name)] = (
                f"its {format} definition uses types it does not define: {', '.join(undefined)}"
            )
            return
        try:
            try:
                store.register(typs)
            except TypesysError:
                self._override(store, typs)
        except Exception as exc:  # rosbags could not compile it: report it with the type's messages
            self._definition_errors[(serialization, name)] = f"its {format} definition is unusable: {_one_line(exc)}"
            return
        self._definition_errors.pop((serialization, name), None)
        self._resolved.clear()
        self._jazzy_layout.clear()

    @staticmethod
    def _override(store: Typestore, typs: Typesdict) -> None:
        """Replace the store's definitions of these types by the recording's."""
        scratch = get_typestore(Stores.EMPTY)
        missing = {name: store.fielddefs[name] for name in store.fielddefs if name not in typs}
        scratch.register({**missing, **typs})
        for name in typs:
            store.fielddefs[name] = scratch.fielddefs[name]
            store.types[name] = scratch.types[name]
        store.cache.clear()  # compiled (de)serializers of dependent types refer to the old ones

    def resolve(self, msgtype: str, serialization: Serialization = "cdr") -> str | None:
        """The store's name for ``msgtype``, or None when it cannot be decoded."""
        key = (serialization, msgtype)
        if key not in self._resolved:
            store = self._store(serialization)
            found: str | None = None
            if store is not None:
                normalized = normalize_msgtype(msgtype)
                for name in (normalized, LEGACY_ALIASES.get(normalized)):
                    if name is not None and name in store.types:
                        found = name
                        break
            self._resolved[key] = found
        return self._resolved[key]

    def has_jazzy_layout(self, msgtype: str) -> bool:
        """Whether CDR messages of ``msgtype`` are laid out as ROS 2 Jazzy defines them: no
        recording replaced the definition of the type or of a type it embeds. (What a
        reader that skips the typestore, like ``fastpath``, relies on.)"""
        if msgtype not in self._jazzy_layout:
            store = self._stores["cdr"]
            name = self.resolve(msgtype)
            same = name is not None
            pending, seen = [name] if name is not None else [], set()
            while same and pending:
                current = pending.pop()
                seen.add(current)
                definition = store.fielddefs[current]
                same = definition == self._jazzy_fielddefs.get(current)
                pending += [n for n in _referenced({current: definition}) if n not in seen]
            self._jazzy_layout[msgtype] = same
        return self._jazzy_layout[msgtype]

    def _known_layout(self, raw: RawMessage) -> str | None:
        """For a CDR type of ``KNOWN_LAYOUTS`` the recording brought no (usable) definition
        of: the first layout that reads this message exactly, learned (``register``) for
        the messages after it; None when none does."""
        msgtype = normalize_msgtype(raw.msgtype)
        if ("cdr", msgtype) in self._definition_errors:
            return None  # (the recording's own definition is what it says)
        for label, definition in KNOWN_LAYOUTS.get(msgtype, ()):
            store = self._layout_stores.get(label)
            if store is None:
                store = self._layout_stores[label] = ros2_typestore()
                store.register(get_types_from_msg(definition, msgtype))
            try:
                store.deserialize_cdr(memoryview(raw.data), msgtype)
            except Exception:  # untrusted bytes, and a layout that may not be theirs
                continue
            self.register(msgtype, definition, "ros2msg")
            self.guessed[msgtype] = label
            return self.resolve(raw.msgtype, raw.serialization)
        return None

    def decode(self, raw: RawMessage) -> object | BadMessage:
        """The message object, or a ``BadMessage`` naming topic, type and what went wrong."""
        where = f"{raw.topic} ({raw.msgtype})"
        store = self._store(raw.serialization)
        if store is None:
            return BadMessage(raw.topic, raw.receive_ns, f"{where}: unknown serialization {raw.serialization!r}")
        name = self.resolve(raw.msgtype, raw.serialization)
        if name is None and raw.serialization == "cdr":
            name = self._known_layout(raw)
        if name is None:
            why = self._definition_errors.get((raw.serialization, normalize_msgtype(raw.msgtype)))
            known = KNOWN_LAYOUTS.get(normalize_msgtype(raw.msgtype)) if raw.serialization == "cdr" else None
            if why is None and known:
                layouts = "; ".join(label for label, _ in known)
                size = len(raw.data)
                why = f"the recording brings no definition, and its {size} bytes fit no layout it had ({layouts})"
            elif why is None:
                distro = "ROS 1 Noetic" if raw.serialization == "ros1" else "ROS 2 Jazzy"
                why = f"unknown message type (not in {distro} and the recording brings no definition)"
            return BadMessage(raw.topic, raw.receive_ns, f"{where}: {why}")
        # A memoryview, because rosbags slices the payload off its header: from bytes, that
        # would copy every image.
        data = memoryview(raw.data)
        try:
            if raw.serialization == "ros1":
                return store.deserialize_ros1(data, name)
            return store.deserialize_cdr(data, name)
        except Exception as exc:  # untrusted bytes: any failure is this message's, not ours
            return BadMessage(
                raw.topic,
                raw.receive_ns,
                f"{where}: cannot decode {len(raw.data)} bytes of {raw.serialization.upper()}: {_one_line(exc)}",
            )
