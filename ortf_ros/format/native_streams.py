"""The manifest's native-rate streams (each in its own table beside the step table) and
the alignment of samples to steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ortf_ros.format import fields
from ortf_ros.format.fields import Fields, JsonDict, drop_none
from ortf_ros.format.spaces import StateComponent, components


@dataclass(frozen=True)
class NativeStream:
    """A stream kept at its native rate, every sample with its stamps, in its own table
    beside the step table (``layout.stream_path``); steps point into it by sample index.

    The spec says ORTF preserves native rates; a 1 kHz force-torque sensor sampled at a
    30 Hz step rate would otherwise lose 97% of what it measured.
    """

    columns: Mapping[str, StateComponent]
    sensor: str | None = None
    rate_hz: float | None = None
    source: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> NativeStream:
        return cls(
            columns=components(f, "columns", required=True),
            sensor=f.optional("sensor", fields.string),
            rate_hz=f.optional("rate_hz", fields.number),
            source=f.optional("source", fields.string),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            "columns": {k: v.to_dict() for k, v in self.columns.items()},
            **drop_none({"sensor": self.sensor, "rate_hz": self.rate_hz, "source": self.source}),
            **self.extra,
        }


@dataclass(frozen=True)
class AlignmentSummary:
    """How far, over all steps, the samples used were from the step times."""

    steps: int
    max_ms: float
    p95_ms: float
    steps_outside_tolerance: int

    def to_dict(self) -> JsonDict:
        return {
            "steps": self.steps,
            "max_ms": self.max_ms,
            "p95_ms": self.p95_ms,
            "steps_outside_tolerance": self.steps_outside_tolerance,
        }


@dataclass(frozen=True)
class Alignment:
    """Streams whose per-step alignment error is a step column (``layout.alignment_column``).

    ``tolerance_ms`` (key ``tolerance_ms``, an ortf_ros extension like ``alignment``
    itself): each stream's own sync tolerance, by which its steps were counted and are
    judged; a stream it does not name (every stream, in datasets written before it; the
    end effector) is judged by the manifest's ``sync_tolerance_ms``, the loosest."""

    streams: tuple[str, ...]
    summary: Mapping[str, AlignmentSummary] = field(default_factory=dict)
    tolerance_ms: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> Alignment:
        streams = f.required("streams", fields.strings("a list of stream names"))
        summary = {
            name: AlignmentSummary(
                steps=entry.optional("steps", fields.integer) or 0,
                max_ms=entry.optional("max_ms", fields.number) or 0.0,
                p95_ms=entry.optional("p95_ms", fields.number) or 0.0,
                steps_outside_tolerance=entry.optional("steps_outside_tolerance", fields.integer) or 0,
            )
            for name, entry in f.named("summary").items()
        }
        tolerance = f.sub(TOLERANCE_KEY)
        tolerance_ms = {} if tolerance is None else {n: tolerance.required(n, fields.number) for n in tolerance.data}
        return cls(streams=streams, summary=summary, tolerance_ms=tolerance_ms)

    def to_dict(self) -> JsonDict:
        return {
            "streams": list(self.streams),
            **({TOLERANCE_KEY: dict(self.tolerance_ms)} if self.tolerance_ms else {}),
            "summary": {k: v.to_dict() for k, v in self.summary.items()},
        }


TOLERANCE_KEY = "tolerance_ms"
"""``alignment``'s key of each stream's own sync tolerance (``Alignment.tolerance_ms``)."""
