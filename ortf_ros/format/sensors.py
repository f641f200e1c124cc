"""The manifest's sensors and frames: what each sensor records and how its frames are
stored, where it is mounted, and the transforms between frames."""

from __future__ import annotations

from dataclasses import dataclass, field

from ortf_ros.format import fields
from ortf_ros.format.fields import Fields, JsonDict, drop_none


@dataclass(frozen=True)
class Transform:
    """Child-to-parent transform; rotation is a (w, x, y, z) unit quaternion."""

    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)

    @classmethod
    def parse(cls, f: Fields) -> Transform:
        t = f.required("translation", fields.numbers(3))
        r = f.required("rotation", fields.numbers(4))
        return cls(translation=t, rotation=r)  # type: ignore[arg-type]

    def to_dict(self) -> JsonDict:
        return {"translation": list(self.translation), "rotation": list(self.rotation)}


@dataclass(frozen=True)
class Resolution:
    width: int
    height: int

    def to_dict(self) -> JsonDict:
        return {"width": self.width, "height": self.height}


@dataclass(frozen=True)
class Extrinsics:
    parent_frame: str
    transform: Transform

    def to_dict(self) -> JsonDict:
        return {"parent_frame": self.parent_frame, **self.transform.to_dict()}


CAMERA_TYPES = ("camera", "depth_camera")
UNKNOWN_INTRINSICS: JsonDict = {"unknown": True}
"""A camera's ``intrinsics`` when its source recorded no calibration: ORTF requires the
field, and saying "unknown" keeps anyone from training on a made-up one."""


@dataclass(frozen=True)
class Sensor:
    """A sensor entry. Type-specific fields not modelled here stay in ``extra``.

    For cameras ``encoding`` says how frames are stored: ``h264`` (MP4) for colour,
    ``ffv1`` (lossless gray16le in MP4) or ``npz`` for 16-bit depth.
    """

    name: str
    type: str
    mount: str | None = None
    mount_link: str | None = None
    resolution: Resolution | None = None
    fps: float | None = None
    encoding: str | None = None
    intrinsics: JsonDict | None = None
    distortion: JsonDict | None = None
    extrinsics: Extrinsics | None = None
    extra: JsonDict = field(default_factory=dict)

    @property
    def is_camera(self) -> bool:
        return self.type in CAMERA_TYPES

    @property
    def is_depth(self) -> bool:
        return self.type == "depth_camera"

    @property
    def intrinsics_unknown(self) -> bool:
        """Whether the intrinsics are declared unknown (``UNKNOWN_INTRINSICS``)."""
        return self.intrinsics is not None and self.intrinsics.get("unknown") is True

    @classmethod
    def parse(cls, f: Fields) -> Sensor:
        res_f = f.sub("resolution")
        resolution = None
        if res_f is not None:
            resolution = Resolution(
                width=res_f.required("width", fields.integer),
                height=res_f.required("height", fields.integer),
            )
        ext_f = f.sub("extrinsics")
        extrinsics = None
        if ext_f is not None:
            extrinsics = Extrinsics(
                parent_frame=ext_f.required("parent_frame", fields.string),
                transform=Transform.parse(ext_f),
            )
        return cls(
            name=f.required("name", fields.string),
            type=f.required("type", fields.string),
            mount=f.optional("mount", fields.string),
            mount_link=f.optional("mount_link", fields.string),
            resolution=resolution,
            fps=f.optional("fps", fields.number),
            encoding=f.optional("encoding", fields.string),
            intrinsics=f.optional("intrinsics", fields.mapping) or None,
            distortion=f.optional("distortion", fields.mapping) or None,
            extrinsics=extrinsics,
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **drop_none(
                {
                    "name": self.name,
                    "type": self.type,
                    "mount": self.mount,
                    "mount_link": self.mount_link,
                    "resolution": self.resolution.to_dict() if self.resolution else None,
                    "fps": self.fps,
                    "encoding": self.encoding,
                    "intrinsics": self.intrinsics,
                    "distortion": self.distortion,
                    "extrinsics": self.extrinsics.to_dict() if self.extrinsics else None,
                }
            ),
            **self.extra,
        }

    def has_field(self, key: str) -> bool:
        """Whether the manifest entry carries ``key`` (modelled or extra)."""
        value = self.to_dict().get(key)
        return value is not None and value != {}


@dataclass(frozen=True)
class Frame:
    type: str
    parent: str | None = None
    transform: Transform | None = None
    convention: str | None = None
    source: str | None = None
    description: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> Frame:
        tf_f = f.sub("transform")
        return cls(
            type=f.required("type", fields.string),
            parent=f.optional("parent", fields.string),
            transform=Transform.parse(tf_f) if tf_f is not None else None,
            convention=f.optional("convention", fields.string),
            source=f.optional("source", fields.string),
            description=f.optional("description", fields.string),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **drop_none(
                {
                    "type": self.type,
                    "parent": self.parent,
                    "transform": self.transform.to_dict() if self.transform else None,
                    "convention": self.convention,
                    "source": self.source,
                    "description": self.description,
                }
            ),
            **self.extra,
        }
