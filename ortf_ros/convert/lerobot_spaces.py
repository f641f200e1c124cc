"""LeRobot's concatenated vectors split back into ORTF's named state components and action.

LeRobot stores state as one ``observation.state`` vector whose elements the feature's
``names`` label; ORTF keeps one column per component (joint positions, gripper, ...).
The split follows, in this order:

1. ``meta/modality.json`` (GR00T): each ``state`` entry's ``start:end`` is a component;
2. names of the form ``component.element`` (what ``ortf export lerobot`` writes):
   each run of one prefix is a component;
3. otherwise the feature is one component, named after its key without
   ``observation.`` (``observation.state`` -> ``state``).

Every other ``observation.*`` numeric feature is a component by the same rules. Numeric
features that are neither observation nor action (``next.reward``, ``next.done``, ...)
have no ORTF step column; they are kept as a native-rate stream (``EXTRAS_STREAM``) with
one sample per step, so nothing LeRobot stored is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortf_ros.convert.lerobot_meta import INDEX_FEATURES, MODALITY, NUMERIC_DTYPES, Feature, LeRobotMeta
from ortf_ros.errors import ExportError
from ortf_ros.format.native_streams import NativeStream
from ortf_ros.format.spaces import ActionDimension, ActionSpace, StateComponent

OBSERVATION_PREFIX = "observation."
ACTION = "action"
EXTRAS_STREAM = "lerobot_extras"
# Columns ``ortf export lerobot`` adds for itself (capture time, depth frame indices).
ORTF_PREFIX = "ortf."
UNKNOWN = "unknown"
# LeRobot names an action's elements but not what they are. The spec has no "unknown" type, so
# each dimension takes its most general one, and its description says that it is a stand-in.
UNDESCRIBED_TYPE = "continuous"
UNDESCRIBED_ACTION = (
    "the source LeRobot dataset does not say what this dimension is: "
    "continuous is the spec's most general type, and the units are unknown"
)
_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]+")


@dataclass(frozen=True)
class Part:
    """Elements ``start:end`` of a LeRobot feature, stored as ORTF vector ``name``."""

    feature: str
    start: int
    end: int
    name: str


@dataclass(frozen=True)
class Spaces:
    state: Mapping[str, StateComponent]
    state_parts: tuple[Part, ...]
    action: ActionSpace
    extras: NativeStream | None
    extra_parts: tuple[Part, ...]


def identifier(text: str) -> str:
    """A name usable as an ORTF column or stream name."""
    return _IDENTIFIER.sub("_", text).strip("_") or "value"


def split_spaces(meta: LeRobotMeta) -> Spaces:
    if ACTION not in meta.features:
        raise ExportError(f"{meta.root / 'meta/info.json'}: features.action: required feature is missing")
    numeric = {
        k: f
        for k, f in meta.features.items()
        if f.dtype in NUMERIC_DTYPES and k not in INDEX_FEATURES and not k.startswith(ORTF_PREFIX)
    }
    for feature in numeric.values():
        if len(feature.shape) != 1:
            raise ExportError(
                f"{meta.root / 'meta/info.json'}: features.{feature.key}.shape: expected a vector, got {feature.shape}"
            )
    observed = [f for k, f in numeric.items() if k.startswith(OBSERVATION_PREFIX)]
    if not observed:
        raise ExportError(f"{meta.root / 'meta/info.json'}: features: no numeric observation.* (state) feature")
    state: dict[str, StateComponent] = {}
    state_parts: list[Part] = []
    for feature in observed:
        for part, names in _state_parts(feature, meta.modality if feature.key == "observation.state" else None):
            if part.name in state:
                raise ExportError(f"{meta.root / 'meta/info.json'}: state component {part.name!r} appears twice")
            state[part.name] = StateComponent(part.end - part.start, UNKNOWN, names=names)
            state_parts.append(part)
    extra_features = [f for k, f in numeric.items() if k != ACTION and not k.startswith(OBSERVATION_PREFIX)]
    extra_parts = tuple(Part(f.key, 0, f.size, identifier(f.key)) for f in extra_features)
    extras = None
    if extra_parts:
        extras = NativeStream(
            columns={p.name: StateComponent(p.end, UNKNOWN) for p in extra_parts},
            rate_hz=meta.fps,
            source="lerobot features " + ", ".join(f.key for f in extra_features),
        )
    return Spaces(state, tuple(state_parts), _action(meta, numeric[ACTION]), extras, extra_parts)


def _state_parts(feature: Feature, modality: Mapping[str, Any] | None) -> list[tuple[Part, tuple[str, ...] | None]]:
    names = feature.names if feature.names and len(feature.names) == feature.size else None
    if modality is not None and "state" in modality:
        slices = _modality_slices(modality, "state", feature.size)
        return [(Part(feature.key, a, b, identifier(key)), names[a:b] if names else None) for key, a, b in slices]
    if names and all("." in n for n in names):
        parts: list[tuple[Part, tuple[str, ...] | None]] = []
        start = 0
        for end in range(1, len(names) + 1):
            prefix = names[start].split(".", 1)[0]
            if end == len(names) or names[end].split(".", 1)[0] != prefix:
                elements = tuple(n.split(".", 1)[1] for n in names[start:end])
                numbered = elements == tuple(map(str, range(end - start)))  # the exporter's stand-in for no names
                parts.append((Part(feature.key, start, end, identifier(prefix)), None if numbered else elements))
                start = end
        return parts
    return [(Part(feature.key, 0, feature.size, identifier(feature.key.removeprefix(OBSERVATION_PREFIX))), names)]


def _modality_slices(modality: Mapping[str, Any], section: str, size: int) -> list[tuple[str, int, int]]:
    """(key, start, end) in array order; they must tile 0..size exactly."""
    entries = modality.get(section)
    if not isinstance(entries, dict):
        raise ExportError(f"{MODALITY}: {section}: expected an object of slices")
    slices = []
    for key, entry in entries.items():
        start, end = (entry.get("start"), entry.get("end")) if isinstance(entry, dict) else (None, None)
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end):
            raise ExportError(f"{MODALITY}: {section}.{key}: expected integer start < end, got {entry!r}")
        slices.append((key, start, end))
    slices.sort(key=lambda s: s[1])
    covered = [i for _, a, b in slices for i in range(a, b)]
    if covered != list(range(size)):
        raise ExportError(
            f"{MODALITY}: {section}: slices {[(a, b) for _, a, b in slices]} do not cover 0..{size} exactly once"
        )
    return slices


def _action(meta: LeRobotMeta, feature: Feature) -> ActionSpace:
    names = _action_names(feature, meta.modality)
    dimensions = tuple(
        ActionDimension(name, i, UNDESCRIBED_TYPE, UNKNOWN, description=UNDESCRIBED_ACTION)
        for i, name in enumerate(names)
    )
    return ActionSpace(type=UNKNOWN, dimensions=dimensions, control_frequency_hz=meta.fps)


def _action_names(feature: Feature, modality: Mapping[str, Any] | None) -> Sequence[str]:
    if feature.names and len(feature.names) == feature.size:
        return feature.names
    if modality is not None and ACTION in modality:
        slices = _modality_slices(modality, ACTION, feature.size)
        return [f"{key}_{i - a}" for key, a, b in slices for i in range(a, b)]
    return [f"action_{i}" for i in range(feature.size)]
