"""The manifest's action and observation spaces: what each column of ``action`` and of
``observation.state.<name>`` means (names, units, frames, ranges), and which sensor
each image key is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ortf_ros.format import fields
from ortf_ros.format.fields import Fields, JsonDict, drop_none


@dataclass(frozen=True)
class ActionDimension:
    name: str
    index: int
    type: str
    units: str
    range: tuple[float, float] | None = None
    values: tuple[float, ...] | None = None
    description: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> ActionDimension:
        return cls(
            name=f.required("name", fields.string),
            index=f.required("index", fields.integer),
            type=f.required("type", fields.string),
            units=f.required("units", fields.string),
            range=f.optional("range", fields.numbers(2)),  # type: ignore[arg-type]
            values=f.optional("values", fields.numbers()),
            description=f.optional("description", fields.string),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **drop_none(
                {
                    "name": self.name,
                    "index": self.index,
                    "type": self.type,
                    "units": self.units,
                    "range": list(self.range) if self.range is not None else None,
                    "values": list(self.values) if self.values is not None else None,
                    "description": self.description,
                }
            ),
            **self.extra,
        }


@dataclass(frozen=True)
class ActionSpace:
    type: str
    dimensions: tuple[ActionDimension, ...]
    frame: str | None = None
    control_frequency_hz: float | None = None
    normalization: JsonDict | None = None
    extra: JsonDict = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return len(self.dimensions)

    @classmethod
    def parse(cls, f: Fields) -> ActionSpace:
        return cls(
            type=f.required("type", fields.string),
            dimensions=tuple(ActionDimension.parse(d) for d in f.entries("dimensions", required=True)),
            frame=f.optional("frame", fields.string),
            control_frequency_hz=f.optional("control_frequency_hz", fields.number),
            normalization=f.optional("normalization", fields.mapping) or None,
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **drop_none(
                {
                    "type": self.type,
                    "frame": self.frame,
                    "control_frequency_hz": self.control_frequency_hz,
                    "dimensions": [d.to_dict() for d in self.dimensions],
                    "normalization": self.normalization,
                }
            ),
            **self.extra,
        }


@dataclass(frozen=True)
class StateComponent:
    """One ``observation.state.<name>`` vector; ``names`` labels its elements."""

    dim: int
    units: str | None = None
    frame: str | None = None
    order: str | None = None
    range: tuple[float, float] | None = None
    names: tuple[str, ...] | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> StateComponent:
        names = f.optional("names", fields.strings("a list of strings"))
        dim = f.required("dim", fields.integer)
        if dim < 1:
            raise f.fail("dim", "a positive integer", dim)
        return cls(
            dim=dim,
            units=f.optional("units", fields.string),
            frame=f.optional("frame", fields.string),
            order=f.optional("order", fields.string),
            range=f.optional("range", fields.numbers(2)),  # type: ignore[arg-type]
            names=names,
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **drop_none(
                {
                    "dim": self.dim,
                    "units": self.units,
                    "frame": self.frame,
                    "order": self.order,
                    "range": list(self.range) if self.range is not None else None,
                    "names": list(self.names) if self.names is not None else None,
                }
            ),
            **self.extra,
        }


def components(f: Fields, key: str, *, required: bool = False) -> dict[str, StateComponent]:
    """The mapping ``key`` of names to state components (``observation_space.state``, a
    native stream's ``columns``)."""
    return {name: StateComponent.parse(entry) for name, entry in f.named(key, required=required).items()}


@dataclass(frozen=True)
class ObservationSpace:
    """State components and cameras; ``images`` maps an observation key to a sensor name."""

    state: Mapping[str, StateComponent]
    images: Mapping[str, str] = field(default_factory=dict)
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> ObservationSpace:
        state = components(f, "state", required=True)
        images_f = f.sub("images")
        images: dict[str, str] = {}
        if images_f is not None:
            for key in images_f.data:
                images[key] = images_f.required(key, fields.string)
        return cls(state=state, images=images, extra=f.extra())

    def to_dict(self) -> JsonDict:
        return {
            "state": {k: v.to_dict() for k, v in self.state.items()},
            "images": dict(self.images),
            **self.extra,
        }
