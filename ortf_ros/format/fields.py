"""One typed reader of settings and of JSON objects: a manifest, a topic mapping, the
writer's settings, the player's and the recorder's parameters.

Each of these used to have its own reader, and each checked types, nulls, unknown keys
and ranges a little differently. Here one ``Fields`` reads one mapping with typed
getters (``get`` with a default, ``optional``, ``required``), each given a ``Check``:
a function that turns the value into its type or raises an error naming where it is.
Ranges are ``bounds.Bound``s (``bounded``), so a mapping key, a flag and a ROS
parameter of the same setting accept the same values with the same words.

What differs between families of settings is how they word an error, and that is a
``Wording``: the error class, how a wrong value is shown, the word before a key
(``parameter rate``), what a mapping is called (a JSON "object") and what a missing or
unknown key is. Every error reads ``ORIGIN: [LABEL]PATH: PROBLEM``, e.g.
``teleop.yaml: cameras.wrist.topic: expected a topic name starting with '/', got 'x'``
or ``parameter warmup_s: expected a positive number up to 3600, got -1``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from ortf_ros import bounds
from ortf_ros.bounds import Bound
from ortf_ros.errors import OrtfError

_T = TypeVar("_T")
_U = TypeVar("_U")
_S = TypeVar("_S", bound=str)
JsonDict = dict[str, Any]

Check = Callable[["Fields", str, object], _T]
"""What one value must be: ``check(fields, key, value)`` returns it typed, or raises
``fields.fail(key, ...)``/``fields.error(key, ...)``."""


@dataclass(frozen=True)
class Wording:
    """How one family of settings words its errors."""

    error: type[OrtfError]
    show: Callable[[object], str] = bounds.show
    """How a wrong value is shown after ``got``."""
    label: str = ""
    """Before a key's path: ``parameter `` for ROS parameters."""
    mapping: str = "a mapping"
    """What a nested mapping is called (JSON says ``an object``)."""
    missing: str = "required key is missing"
    unknown: str = "unknown key (expected one of {keys})"
    """A key not among the allowed ones; ``{keys}`` lists them."""


_MISSING: Any = object()


class Fields:
    """One mapping read with typed getters whose errors name its origin and the key's path.

    ``keys``, when given, are the only keys allowed (others are errors, as are keys that
    are not strings). Without it, the keys no getter read are ``extra()``: a manifest keeps
    them, so a file written by another tool survives a round trip.
    """

    def __init__(
        self, data: object, origin: str, wording: Wording, *, path: str = "", keys: Collection[str] | None = None
    ) -> None:
        self.origin = origin
        self.wording = wording
        self.path = path
        self.used: set[str] = set()
        if not isinstance(data, Mapping):
            raise self.fail("", wording.mapping, data)
        if keys is not None:
            for key in data:
                if not isinstance(key, str):
                    raise self.error("", f"keys must be strings, got {wording.show(key)}")
                if key not in keys:
                    raise self.error(key, wording.unknown.format(keys=", ".join(keys)))
        self.data: Mapping[str, Any] = data

    def where(self, key: str) -> str:
        """The path of ``key`` (``cameras.wrist.topic``, ``joints[2]``); of this mapping for ``""``."""
        if not key:
            return self.path or "top level"
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, problem: str) -> OrtfError:
        place = f"{self.wording.label}{self.where(key)}: {problem}"
        return self.wording.error(f"{self.origin}: {place}" if self.origin else place)

    def fail(self, key: str, expected: str, value: object) -> OrtfError:
        return self.error(key, f"expected {expected}, got {self.wording.show(value)}")

    def given(self, key: str) -> bool:
        """Whether ``key`` is present with a non-null value."""
        return self.data.get(key) is not None

    def _lookup(self, key: str) -> Any:
        self.used.add(key)
        return self.data.get(key, _MISSING)

    def get(self, key: str, check: Check[_T], default: _T) -> _T:
        """``key`` checked, ``default`` when absent; null is an error (``optional`` allows it)."""
        value = self._lookup(key)
        if value is _MISSING:
            return default
        if value is None:
            raise self.error(key, "must not be null")
        return check(self, key, value)

    def optional(self, key: str, check: Check[_T]) -> _T | None:
        """``key`` checked; None when absent or null."""
        value = self._lookup(key)
        return None if value is _MISSING or value is None else check(self, key, value)

    def required(self, key: str, check: Check[_T]) -> _T:
        """``key`` checked; absent or null is an error (``Wording.missing``)."""
        value = self.optional(key, check)
        if value is None:
            raise self.error(key, self.wording.missing)
        return value

    def child(self, data: object, path: str, keys: Collection[str] | None = None) -> Fields:
        """A nested mapping at ``path``, read with the same origin and wording."""
        return Fields(data, self.origin, self.wording, path=path, keys=keys)

    @overload
    def sub(self, key: str, keys: Collection[str] | None = None, *, required: Literal[True]) -> Fields: ...

    @overload
    def sub(self, key: str, keys: Collection[str] | None = None, *, required: bool = False) -> Fields | None: ...

    def sub(self, key: str, keys: Collection[str] | None = None, *, required: bool = False) -> Fields | None:
        """The nested mapping ``key``; None when absent or null (an error when ``required``)."""
        value = self._lookup(key)
        if value is _MISSING or value is None:
            if required:
                raise self.error(key, self.wording.missing)
            return None
        return self.child(value, self.where(key), keys)

    def named(self, key: str, *, required: bool = False) -> dict[str, Fields]:
        """The mapping ``key`` of names to mappings (``frames``, ``native_streams``), each
        one required; empty when absent or null."""
        entries = self.sub(key, required=required)
        return {} if entries is None else {name: entries.sub(name, required=True) for name in entries.data}

    def entries(self, key: str, keys: Collection[str] | None = None, *, required: bool = False) -> list[Fields]:
        """The list of mappings ``key`` (``key[0]``, ``key[1]``...); empty when absent or null."""
        value = self.required(key, _objects) if required else self.optional(key, _objects) or []
        return [self.child(entry, f"{self.where(key)}[{i}]", keys) for i, entry in enumerate(value)]

    def extra(self) -> JsonDict:
        """The keys no getter has read."""
        return {k: v for k, v in self.data.items() if k not in self.used}

    def nested(self) -> dict[str, Any]:
        """Flat dotted names (ROS parameters) as nested mappings: ``{"cameras.wrist.topic": x}``
        -> ``{"cameras": {"wrist": {"topic": x}}}``; a tuple value becomes a list (YAML's)."""
        nested: dict[str, Any] = {}
        for name, value in self.data.items():
            node = nested
            *parents, leaf = name.split(".")
            for i, part in enumerate(parents):
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    raise self.error(".".join(parents[: i + 1]), "is a value and a namespace")
                node = child
            if isinstance(node.get(leaf), dict):
                raise self.error(name, "is a value and a namespace")
            node[leaf] = list(value) if isinstance(value, tuple) else value
        return nested


# ---------------------------------------------------------------- checks


def string(fields: Fields, key: str, value: object) -> str:
    """Any string (the empty one too)."""
    if not isinstance(value, str):
        raise fields.fail(key, "a string", value)
    return value


def nonempty_string(fields: Fields, key: str, value: object) -> str:
    """A string with something but blanks in it."""
    if not isinstance(value, str) or not value.strip():
        raise fields.fail(key, "a non-empty string", value)
    return value


def integer(fields: Fields, key: str, value: object) -> int:
    """An integer (not a bool: ``true`` is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise fields.fail(key, "an integer", value)
    return value


def number(fields: Fields, key: str, value: object) -> float:
    """An integer or float (not a bool), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fields.fail(key, "a number", value)
    return float(value)


def flag(fields: Fields, key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise fields.fail(key, "true or false", value)
    return value


def mapping(fields: Fields, key: str, value: object) -> JsonDict:
    """A nested mapping taken as it is (a copy), not read key by key."""
    if not isinstance(value, Mapping):
        raise fields.fail(key, fields.wording.mapping, value)
    return dict(value)


def _objects(fields: Fields, key: str, value: object) -> list[object]:
    if not isinstance(value, list):
        raise fields.fail(key, "a list of objects", value)
    return value


def topic_name(fields: Fields, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/") or value == "/" or any(c.isspace() for c in value):
        raise fields.fail(key, "a topic name starting with '/'", value)
    return value


def frame_name(fields: Fields, key: str, value: object) -> str:
    """A TF frame, without the leading slash ROS 1 allowed."""
    if not isinstance(value, str) or not value.lstrip("/") or any(c.isspace() for c in value):
        raise fields.fail(key, "a frame name", value)
    return value.lstrip("/")


def bounded(bound: Bound) -> Check[float]:
    """A number within ``bound``, in its words (the one check a flag or parameter of the same setting has)."""

    def check(fields: Fields, key: str, value: object) -> float:
        problem = bound.problem(value)
        if problem is not None:
            raise fields.error(key, problem)
        return float(value)  # type: ignore[arg-type]

    return check


def bounded_int(bound: Bound) -> Check[int]:
    """An integer setting within ``bound`` (a count, a depth)."""
    within = bounded(bound)
    return lambda fields, key, value: int(within(fields, key, value))


def one_of(choices: tuple[_S, ...]) -> Check[_S]:
    def check(fields: Fields, key: str, value: object) -> _S:
        if value not in choices:
            raise fields.fail(key, f"one of {', '.join(choices)}", value)
        return value

    return check


def of_type(kind: type[_T], expected: str | None = None) -> Check[_T]:
    """A value of exactly ``kind`` (a bool is no int here); ``expected`` defaults to the type's name."""

    def check(fields: Fields, key: str, value: object) -> _T:
        if type(value) is not kind:
            raise fields.fail(key, expected or kind.__name__, value)
        return value

    return check


def numbers(length: int | None = None) -> Check[tuple[float, ...]]:
    """A list of numbers (``length`` of them when given), refused as a whole."""

    def check(fields: Fields, key: str, value: object) -> tuple[float, ...]:
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
            raise fields.fail(key, "a list of numbers", value)
        if length is not None and len(value) != length:
            raise fields.fail(key, f"{length} numbers", value)
        return tuple(float(v) for v in value)

    return check


def strings(expected: str) -> Check[tuple[str, ...]]:
    """A list of strings, refused as a whole (``expected`` words it: ``a list of stream names``)."""

    def check(fields: Fields, key: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fields.fail(key, expected, value)
        return tuple(value)

    return check


def list_of(item: Check[_T], expected: str, *, unique: bool = False) -> Check[tuple[_T, ...]]:
    """A list whose items are checked one by one (``key[i]`` in errors); ``unique``: none twice."""

    def check(fields: Fields, key: str, value: object) -> tuple[_T, ...]:
        if not isinstance(value, list):
            raise fields.fail(key, expected, value)
        items = tuple(item(fields, f"{key}[{i}]", v) for i, v in enumerate(value))
        if unique:
            for i, one in enumerate(items):
                if one in items[:i]:
                    raise fields.error(f"{key}[{i}]", f"{one!r} is listed twice")
        return items

    return check


def chain(first: Check[_T], then: Callable[[Fields, str, _T], _U]) -> Check[_U]:
    """``first``, then ``then`` on what it returned (a type, then a range)."""
    return lambda fields, key, value: then(fields, key, first(fields, key, value))


def drop_none(data: Mapping[str, Any]) -> JsonDict:
    """``data`` without its None values: what a reader reads back as absent is not written."""
    return {k: v for k, v in data.items() if v is not None}
