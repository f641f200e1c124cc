"""Where each feature of an RLDS dataset goes in ORTF: the plan ``ortf import rlds`` follows.

Decided from ``features.json`` alone, before any episode is read, so a dataset that
cannot be imported is refused at once and every feature's fate is known for the summary:

- ``is_first``/``is_last``/``is_terminal``: ORTF's flags (the writer marks the first and
  last step; ``is_terminal`` on any step makes the episode terminal).
- ``language_instruction`` (or any text feature whose name holds ``instruction``), per
  step or per episode: the episode's task.
- ``action``: a tensor, or a dict of tensors concatenated (``--action-keys`` picks and
  orders them); the dimensions are named after the parts, typed and given units by the
  ``--action-*`` options, otherwise declared unknown: never guessed.
- ``observation/*``: encoded images and uint8 (H, W, 3) arrays become cameras; uint16
  single-channel images depth cameras (kept bit-exact); float depth (an array, or TFDS's
  float32 image, bitcast to PNG) is converted to millimetres only when
  ``--float-depth-units`` says what it is in; every other numeric observation a state
  component (flattened if it is a matrix).
- other numeric per-step features (``reward``, ``discount``, action parts not chosen, a
  source ``timestamp``): columns of the native-rate stream ``rlds_steps``, one sample per
  step, so nothing numeric is lost.
- episode features: ``success``, ``failure_reason``, ``operator_notes``, ``recorded_at``
  become the episode's labels; the rest go to the manifest's ``rlds`` extension.

A dataset written by ``ortf export rlds`` carries its ORTF manifest in ``metadata.json``:
the plan then follows that manifest (component, camera and action names and units, step
times from ``timestamp``), and skips what the export derived (``observation/state``,
``reward``, ``discount``, ``episode_id``, ``duration_seconds``), so the round trip is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ortf_ros.convert.lerobot_spaces import identifier
from ortf_ros.convert.tfds_layout import IMAGE, TENSOR, TEXT, Leaf, TfdsDataset
from ortf_ros.errors import ExportError
from ortf_ros.format.manifest import Manifest

FLAGS = ("is_first", "is_last", "is_terminal")
LABELS = ("success", "failure_reason", "operator_notes", "recorded_at")
EXTRAS_STREAM = "rlds_steps"
# What ``ortf export rlds`` derives from other fields: skipped when importing its output.
EXPORT_DERIVED = {
    "observation/state": "the state components concatenated by ortf export rlds",
    "reward": "derived from the episode's success by ortf export rlds",
    "discount": "always 1.0 in ortf export rlds",
    "episode_metadata/episode_id": "ORTF numbers episodes itself (in the same order)",
    "episode_metadata/duration_seconds": "ORTF derives it from the step times",
}
FLOAT_DEPTH_UNITS = {"m": 1000.0, "mm": 1.0}  # --float-depth-units -> millimetres per unit
NUMERIC_KINDS = "biuf"


@dataclass(frozen=True)
class ActionOptions:
    """The ``--action-*`` options: which parts make the action and what its dimensions are."""

    keys: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    units: tuple[str, ...] | None = None
    space_type: str | None = None


@dataclass(frozen=True)
class Camera:
    leaf: Leaf
    depth: bool
    scale: float | None = None  # float depth: millimetres per source unit


@dataclass
class Plan:
    flags: dict[str, Leaf] = field(default_factory=dict)
    timestamp: Leaf | None = None
    instruction: Leaf | None = None
    action: list[Leaf] = field(default_factory=list)
    state: dict[str, Leaf] = field(default_factory=dict)
    cameras: dict[str, Camera] = field(default_factory=dict)
    extras: dict[str, Leaf] = field(default_factory=dict)
    labels: dict[str, Leaf] = field(default_factory=dict)
    kept: list[Leaf] = field(default_factory=list)
    summary: dict[str, str] = field(default_factory=dict)

    @property
    def action_dim(self) -> int:
        return sum(leaf.size for leaf in self.action)


def make_plan(
    source: TfdsDataset,
    action: ActionOptions,
    origin: Manifest | None,
    float_depth_units: str | None,
) -> Plan:
    plan = Plan()
    steps_prefix = source.steps_key + "/"
    step_leaves = {leaf.path.removeprefix(steps_prefix): leaf for leaf in source.leaves if leaf.per_step}
    episode_leaves = [leaf for leaf in source.leaves if not leaf.per_step]
    derived = EXPORT_DERIVED if origin is not None else {}
    leave = plan.summary.__setitem__
    for name, leaf in step_leaves.items():
        if leaf.kind not in (TENSOR, IMAGE, TEXT):
            leave(leaf.path, f"left: {leaf.why}")
        elif name in derived:
            leave(leaf.path, f"left: {derived[name]}")
        elif name in FLAGS:
            plan.flags[name] = leaf
            leave(
                leaf.path, f"ORTF {name}" if name != "is_terminal" else "the episode's terminal flag (ORTF is_terminal)"
            )
        elif name == "timestamp" and origin is not None and leaf.kind == TENSOR:
            plan.timestamp = leaf
            leave(leaf.path, "the step times (seconds)")
    _instruction(plan, step_leaves, episode_leaves)
    _action(plan, source, step_leaves, action)
    _observations(plan, step_leaves, float_depth_units)
    for name, leaf in step_leaves.items():
        if leaf.path in plan.summary:
            continue
        if leaf.kind == TENSOR and np.dtype(leaf.dtype).kind in NUMERIC_KINDS:
            column = identifier(name)
            plan.extras[column] = leaf
            leave(leaf.path, f"native stream {EXTRAS_STREAM!r}, column {column!r} (one sample per step)")
        else:
            leave(leaf.path, "left: text per step other than the instruction has no ORTF column")
    for leaf in episode_leaves:
        if leaf.path in plan.summary:
            continue
        last = leaf.path.rsplit("/", 1)[-1]
        if leaf.path in derived:
            leave(leaf.path, f"left: {derived[leaf.path]}")
        elif last in LABELS and last not in plan.labels and _fits_label(last, leaf):
            plan.labels[last] = leaf
            leave(leaf.path, f"the episode's {last} label")
        elif leaf.kind in (TENSOR, TEXT):
            plan.kept.append(leaf)
            leave(leaf.path, f"manifest extension rlds.episode_metadata[<episode id>][{leaf.path!r}]")
        else:
            leave(leaf.path, f"left: {leaf.why}")
    plan.summary = {leaf.path: plan.summary[leaf.path] for leaf in source.leaves}  # in features.json's order
    return plan


def _fits_label(label: str, leaf: Leaf) -> bool:
    if label == "success":
        return leaf.kind == TENSOR and leaf.shape == () and np.dtype(leaf.dtype).kind in "biu"
    return leaf.kind == TEXT


def _instruction(plan: Plan, step_leaves: dict[str, Leaf], episode_leaves: Sequence[Leaf]) -> None:
    """The first text feature named like an instruction, a per-step one before an episode's."""
    texts = [leaf for leaf in step_leaves.values() if leaf.kind == TEXT]
    texts += [leaf for leaf in episode_leaves if leaf.kind == TEXT]
    for leaf in sorted(texts, key=lambda leaf: (not leaf.per_step, "language_instruction" not in leaf.path)):
        if "instruction" in leaf.path.rsplit("/", 1)[-1]:
            plan.instruction = leaf
            plan.summary[leaf.path] = "the episode's task (tasks.jsonl)"
            return


def _action(plan: Plan, source: TfdsDataset, step_leaves: dict[str, Leaf], options: ActionOptions) -> None:
    """The action's parts; those not chosen are left to the native stream (``make_plan``)."""
    where = f"{source.root / 'features.json'}: {source.steps_key}/action"
    single = step_leaves.get("action")
    parts = {name.removeprefix("action/"): leaf for name, leaf in step_leaves.items() if name.startswith("action/")}
    if single is not None:
        if single.kind != TENSOR or np.dtype(single.dtype).kind not in NUMERIC_KINDS:
            raise ExportError(f"{where}: expected a numeric tensor, got {single.kind} {single.dtype}")
        if options.keys:
            raise ExportError(f"--action-keys: {where} is one tensor, not a dict of parts")
        plan.action = [single]
        plan.summary[single.path] = "ORTF action"
        return
    numeric = {
        k: leaf for k, leaf in parts.items() if leaf.kind == TENSOR and np.dtype(leaf.dtype).kind in NUMERIC_KINDS
    }
    if not numeric:
        raise ExportError(f"{where}: missing; expected the action (a numeric tensor or a dict of them)")
    chosen = list(options.keys) if options.keys else list(numeric)
    unknown = [k for k in chosen if k not in numeric]
    if unknown:
        raise ExportError(f"--action-keys: {where} has no numeric part {unknown[0]!r}; it has {sorted(numeric)}")
    start = 0
    for key in chosen:
        leaf = numeric[key]
        plan.action.append(leaf)
        plan.summary[leaf.path] = f"ORTF action[{start}:{start + leaf.size}]"
        start += leaf.size


def _observations(plan: Plan, step_leaves: dict[str, Leaf], float_depth_units: str | None) -> None:
    for name, leaf in step_leaves.items():
        if not name.startswith("observation/") or leaf.path in plan.summary:
            continue
        key = identifier(name.removeprefix("observation/"))
        image = _as_image(leaf, float_depth_units)
        if image is not None:
            if isinstance(image, str):
                plan.summary[leaf.path] = f"left: {image}"
                continue
            plan.cameras[key] = image
            stored = leaf.encoding if leaf.kind == IMAGE else "raw array"
            if image.scale is not None:
                stored = f"float in {float_depth_units}, to uint16 mm: rounded; <=0, non-finite, >65535 mm become 0"
            what = "depth camera" if image.depth else "camera"
            plan.summary[leaf.path] = f"{what} {key!r} ({stored}), a video per episode"
        elif leaf.kind == TENSOR and np.dtype(leaf.dtype).kind in NUMERIC_KINDS:
            plan.state[key] = leaf
            shape = "" if len(leaf.shape) <= 1 else f", {leaf.shape} flattened row-major"
            cast = "" if leaf.dtype == "float32" else f", {leaf.dtype} as float32"
            plan.summary[leaf.path] = f"state component {key!r} (dim {leaf.size}{shape}{cast})"


def _as_image(leaf: Leaf, float_depth_units: str | None) -> Camera | str | None:
    """A camera for an image-like feature, a reason to leave one, or None (not an image)."""
    if leaf.kind not in (IMAGE, TENSOR):  # (text has no numpy dtype)
        return None
    shape, kind = leaf.shape, np.dtype(leaf.dtype).kind
    planar = len(shape) == 2 or (len(shape) == 3 and shape[2] == 1)
    float_depth = planar and kind == "f" and "depth" in leaf.path.rsplit("/", 1)[-1]
    if leaf.kind == IMAGE:
        channels = leaf.shape[2]
        if channels == 3 and leaf.dtype == "uint8":
            return Camera(leaf, depth=False)
        if channels == 1 and leaf.dtype == "uint16":
            return Camera(leaf, depth=True)
        if not float_depth:
            return f"a {channels}-channel {leaf.dtype} image (ORTF cameras are RGB uint8 or depth uint16)"
    elif leaf.kind != TENSOR:
        return None
    if len(shape) == 3 and shape[2] == 3 and leaf.dtype == "uint8":
        return Camera(leaf, depth=False)
    if planar and leaf.dtype == "uint16":
        return Camera(leaf, depth=True)
    if float_depth:
        if float_depth_units is None:
            return "float depth whose units the dataset does not state (pass --float-depth-units m|mm to convert it)"
        return Camera(leaf, depth=True, scale=FLOAT_DEPTH_UNITS[float_depth_units])
    return None


def warn_unknown_action(plan: Plan, options: ActionOptions, warn: Callable[[str], None]) -> None:
    missing = [what for what, given in (("types", options.types), ("units", options.units)) if not given]
    if missing:
        warn(
            f"action: the dataset does not say its dimensions' {' and '.join(missing)}; they are declared unknown "
            f"(pass --action-{'/--action-'.join(missing)} to state them)"
        )
