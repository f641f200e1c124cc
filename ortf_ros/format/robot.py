"""The manifest's ``robot``: its name and kind, its joints in ``joint_positions`` order,
its gripper and end effector, and where its URDF is (``format.urdf`` reads the URDF)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ortf_ros.format import fields
from ortf_ros.format.fields import Fields, JsonDict, drop_none


@dataclass(frozen=True)
class Joint:
    name: str
    type: str
    index: int
    limits: tuple[float, float] | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> Joint:
        return cls(
            name=f.required("name", fields.string),
            type=f.required("type", fields.string),
            index=f.required("index", fields.integer),
            limits=f.optional("limits", fields.numbers(2)),  # type: ignore[arg-type]
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        limits = list(self.limits) if self.limits is not None else None
        return {
            **drop_none({"name": self.name, "type": self.type, "index": self.index, "limits": limits}),
            **self.extra,
        }


@dataclass(frozen=True)
class Robot:
    name: str
    id: str | None = None
    manufacturer: str | None = None
    type: str | None = None
    robot_class: str | None = None
    dof: int | None = None
    urdf_path: str | None = None
    joints: tuple[Joint, ...] = ()
    gripper: JsonDict | None = None
    end_effector_link: str | None = None
    extra: JsonDict = field(default_factory=dict)

    @classmethod
    def parse(cls, f: Fields) -> Robot:
        return cls(
            name=f.required("name", fields.string),
            id=f.optional("id", fields.string),
            manufacturer=f.optional("manufacturer", fields.string),
            type=f.optional("type", fields.string),
            robot_class=f.optional("class", fields.string),
            dof=f.optional("dof", fields.integer),
            urdf_path=f.optional("urdf_path", fields.string),
            joints=tuple(Joint.parse(j) for j in f.entries("joints")),
            gripper=f.optional("gripper", fields.mapping) or None,
            end_effector_link=f.optional("end_effector_link", fields.string),
            extra=f.extra(),
        )

    def to_dict(self) -> JsonDict:
        return {
            **drop_none(
                {
                    "id": self.id,
                    "name": self.name,
                    "manufacturer": self.manufacturer,
                    "type": self.type,
                    "class": self.robot_class,
                    "dof": self.dof,
                    "urdf_path": self.urdf_path,
                    "joints": [j.to_dict() for j in self.joints],
                    "gripper": self.gripper,
                    "end_effector_link": self.end_effector_link,
                }
            ),
            **self.extra,
        }
