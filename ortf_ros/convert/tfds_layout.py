"""A TFDS builder directory read without TensorFlow: what ``tfds.builder_from_directory`` reads.

``dataset_info.json`` names the dataset, its splits and their shards (a file name template
and the examples per shard); ``features.json`` is the feature tree (``FeaturesDict``,
``Dataset``, ``Tensor``/``Scalar``, ``Image``, ``Text``, ``ClassLabel``), in the JSON TFDS
4.x writes (``pythonClassName`` + a type-specific body) or the older ``type``/``content``
form; ``metadata.json`` is the builder's free-form metadata. An RLDS dataset is one
example per episode whose ``Dataset`` feature (``steps``) holds the steps; TFDS stores a
per-step feature as one list holding every step's values, under the feature's path
(``steps/observation/image``), which is what ``Leaf.path`` names.
"""

from __future__ import annotations

import contextlib
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ortf_ros.convert.tfrecord import BYTES, FLOATS, FeatureValues, ProtoError, parse_example, read_records
from ortf_ros.errors import ExportError, OrtfError

DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
METADATA = "metadata.json"
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"

TENSOR, IMAGE, TEXT, UNSUPPORTED = "tensor", "image", "text", "unsupported"


@dataclass(frozen=True)
class Leaf:
    """One stored feature: ``path`` is its key in the Example; ``per_step`` whether it is a
    feature of the steps (one value per step) or of the episode; ``why`` says why an
    ``UNSUPPORTED`` one cannot be read."""

    path: str
    kind: str
    dtype: str = ""
    shape: tuple[int | None, ...] = ()
    encoding: str = ""
    doc: str = ""
    per_step: bool = False
    why: str = ""

    @property
    def size(self) -> int:
        return int(np.prod([d or 0 for d in self.shape])) if self.shape else 1


@dataclass(frozen=True)
class Split:
    name: str
    shards: tuple[Path, ...]
    episodes: int


@dataclass(frozen=True)
class TfdsDataset:
    root: Path
    name: str
    version: str
    description: str
    license: str | None
    splits: tuple[Split, ...]
    leaves: tuple[Leaf, ...]
    steps_key: str
    metadata: Mapping[str, Any]

    @staticmethod
    @contextlib.contextmanager
    def decoding(where: str) -> Iterator[None]:
        """A record's values decoded in the block: one that does not (a corrupt field, zlib
        data, an image, values of the wrong size) is one line naming the record."""
        try:
            yield
        except OrtfError:
            raise
        except (ProtoError, zlib.error, cv2.error, ValueError, TypeError) as exc:
            raise ExportError(f"{where}: a value does not decode ({exc})") from None

    def episodes(self, split: Split) -> Iterator[tuple[str, dict[str, FeatureValues]]]:
        """The split's episodes in order: (where it is, for messages; its features still encoded)."""
        for shard in split.shards:
            for number, record in enumerate(read_records(shard)):
                where = f"{shard}: record {number}"
                try:
                    yield where, parse_example(record)
                except ProtoError as exc:
                    raise ExportError(f"{where}: not a tf.train.Example ({exc})") from None


def read_tfds(root: Path) -> TfdsDataset:
    info = _json(root / DATASET_INFO)
    features = _json(root / FEATURES)
    metadata = _json(root / METADATA) if (root / METADATA).is_file() else {}
    name = info.get("name")
    if not isinstance(name, str) or not name:
        raise ExportError(f"{root / DATASET_INFO}: name: expected the dataset's name, got {name!r}")
    file_format = info.get("fileFormat", "tfrecord")
    if file_format != "tfrecord":
        raise ExportError(f"{root / DATASET_INFO}: fileFormat: expected 'tfrecord', got {file_format!r}")
    leaves: list[Leaf] = []
    steps = _walk(features, "", False, leaves, root / FEATURES)
    if steps is None:
        raise ExportError(f"{root / FEATURES}: no Dataset feature (an RLDS dataset keeps its steps in one)")
    try:
        splits = tuple(_split(root, name, entry) for entry in info.get("splits") or [])
    except (TypeError, ValueError, AttributeError) as exc:
        raise ExportError(f"{root / DATASET_INFO}: splits: expected TFDS's split entries ({exc})") from None
    if not splits:
        raise ExportError(f"{root / DATASET_INFO}: splits: expected at least one split")
    redistribution = info.get("redistributionInfo")
    license_info = redistribution.get("license") if isinstance(redistribution, dict) else None
    return TfdsDataset(
        root,
        name,
        str(info.get("version", "")),
        str(info.get("description", "")),
        license_info if isinstance(license_info, str) else None,
        splits,
        tuple(leaves),
        steps,
        metadata if isinstance(metadata, dict) else {},
    )


def _numpy_dtype(name: str) -> bool:
    """Whether numpy knows the dtype a feature names (not bfloat16, not a missing one)."""
    try:
        np.dtype(name)
    except TypeError:
        return False
    return bool(name)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(
            f"{path}: missing; expected a TFDS builder directory (dataset_info.json, features.json, TFRecord shards)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ExportError(f"{path}: expected a JSON object")
    return data


def _split(root: Path, name: str, entry: Mapping[str, Any]) -> Split:
    split = str(entry.get("name", ""))
    lengths = [int(n) for n in entry.get("shardLengths") or []]
    if not lengths and entry.get("numShards"):  # TFDS before 4.0: a shard count, no lengths
        lengths = [0] * int(entry["numShards"])
    template = str(entry.get("filepathTemplate") or DEFAULT_TEMPLATE)
    shards = []
    for index in range(len(lengths)):
        file = (
            template.replace("{SHARD_X_OF_Y}", f"{index:05d}-of-{len(lengths):05d}")
            .replace("{SHARD_INDEX}", f"{index:05d}")
            .replace("{NUM_SHARDS}", f"{len(lengths):05d}")
            .replace("{DATASET}", name)
            .replace("{SPLIT}", split)
            .replace("{FILEFORMAT}", "tfrecord")
        )
        shards.append(root / file)
    missing = [s for s in shards if not s.is_file()]
    if missing:
        raise ExportError(
            f"{missing[0]}: missing; {root / DATASET_INFO} lists {len(shards)} shard(s) of split {split!r}"
        )
    return Split(split, tuple(shards), sum(lengths))


# -- features.json ------------------------------------------------------------------


def _kind(node: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """(class name, body) in either JSON form."""
    if "type" in node and "content" in node:  # TFDS before 4.5: {"type": module.Class, "content": {...}}
        return str(node["type"]).rsplit(".", 1)[-1], node["content"] or {}
    name = str(node.get("pythonClassName", "")).rsplit(".", 1)[-1]
    body: Any = next((v for k, v in node.items() if k not in ("pythonClassName", "description", "metadata")), {})
    return name, body if isinstance(body, dict) else {}


def _walk(node: Any, path: str, per_step: bool, leaves: list[Leaf], where: Path) -> str | None:
    """Append the leaves under ``node``; returns the path of the steps ``Dataset``, if any."""
    if not isinstance(node, dict):
        raise ExportError(f"{where}: {path or 'root'}: expected a feature object, got {node!r}")
    kind, body = _kind(node)
    doc = str(node.get("description") or "")
    steps = None
    if kind == "FeaturesDict":
        children = body.get("features", body) if isinstance(body.get("features"), dict) else body
        for key, child in children.items():
            found = _walk(child, f"{path}/{key}" if path else key, per_step, leaves, where)
            steps = steps or found
        return steps
    if kind in ("Dataset", "Sequence"):
        inner = body.get("feature")
        if kind == "Dataset" and not per_step and inner is not None:
            _walk(inner, path, True, leaves, where)
            return path
        leaves.append(Leaf(path, UNSUPPORTED, doc=doc, per_step=per_step, why=f"a {kind} nested in the steps"))
        return None
    if kind in ("Tensor", "Scalar", "ClassLabel"):
        dtype = "int64" if kind == "ClassLabel" else str(body.get("dtype", ""))
        shape = _shape(body.get("shape"))
        encoding = str(body.get("encoding", "none")).lower()
        if dtype == "string":
            if shape == ():
                leaves.append(Leaf(path, TEXT, dtype, doc=doc, per_step=per_step))
            else:
                leaves.append(
                    Leaf(path, UNSUPPORTED, dtype, shape, doc=doc, per_step=per_step, why="a tensor of strings")
                )
        elif not _numpy_dtype(dtype):
            leaves.append(Leaf(path, UNSUPPORTED, dtype, shape, doc=doc, per_step=per_step, why=f"dtype {dtype!r}"))
        elif per_step and None in shape:
            why = "a per-step tensor of variable shape (stored ragged)"
            leaves.append(Leaf(path, UNSUPPORTED, dtype, shape, doc=doc, per_step=per_step, why=why))
        elif encoding not in ("none", "bytes", "zlib", "encoding.none", "encoding.bytes", "encoding.zlib"):
            leaves.append(Leaf(path, UNSUPPORTED, dtype, shape, why=f"tensor encoding {encoding!r}", per_step=per_step))
        else:
            leaves.append(Leaf(path, TENSOR, dtype, shape, encoding.removeprefix("encoding."), doc, per_step))
        return None
    if kind == "Image":
        dtype = str(body.get("dtype", "uint8"))
        shape = _shape(body.get("shape"))
        encoding = str(body.get("encodingFormat") or body.get("encoding_format") or "png")
        # float32: one channel, its bytes bitcast to a 4-channel PNG (TFDS's only float image)
        plain = dtype in ("uint8", "uint16") and len(shape) == 3 and shape[2] in (1, 3)
        if not plain and not (dtype == "float32" and len(shape) == 3 and shape[2] == 1):
            why = f"an image of dtype {dtype} and shape {shape} (expected uint8 RGB or 1-channel uint8/uint16/float32)"
            leaves.append(Leaf(path, UNSUPPORTED, dtype, shape, doc=doc, per_step=per_step, why=why))
        else:
            leaves.append(Leaf(path, IMAGE, dtype, shape, encoding, doc, per_step))
        return None
    if kind == "Text":
        leaves.append(Leaf(path, TEXT, "string", doc=doc, per_step=per_step))
        return None
    leaves.append(Leaf(path, UNSUPPORTED, doc=doc, per_step=per_step, why=f"TFDS feature type {kind or '?'}"))
    return None


def _shape(shape: Any) -> tuple[int | None, ...]:
    dims = shape.get("dimensions", []) if isinstance(shape, dict) else shape or []
    return tuple(None if int(d) < 0 else int(d) for d in dims)


# -- values -------------------------------------------------------------------------


def tensor_values(leaf: Leaf, feature: FeatureValues | None, steps: int, where: str) -> np.ndarray:
    """A tensor feature's values: (steps, *shape) for a per-step one, else ``shape``."""
    dtype = np.dtype("bool" if leaf.dtype == "bool" else leaf.dtype)
    shape = leaf.shape
    if feature is None:
        raise ExportError(f"{where}: feature {leaf.path!r} is missing from the record")
    if leaf.encoding in ("bytes", "zlib"):
        items = feature.bytes_items()
        data = [zlib.decompress(item) if leaf.encoding == "zlib" else bytes(item) for item in items]
        flat = np.frombuffer(b"".join(data), dtype=dtype)
    elif feature.kind == FLOATS:
        flat = feature.floats()
    elif feature.kind == BYTES:
        raise ExportError(f"{where}: feature {leaf.path!r}: expected numbers, the record holds bytes")
    else:
        flat = feature.ints()
        if dtype == np.uint64:
            flat = flat.view(np.uint64)
    count = steps if leaf.per_step else 1
    fixed = int(np.prod([d for d in shape if d is not None])) if shape else 1
    if None in shape:  # an episode-level tensor of variable length: the one unknown dimension
        if fixed == 0 or flat.size % fixed:
            raise ExportError(f"{where}: feature {leaf.path!r}: {flat.size} values do not fill shape {shape}")
        if shape.count(None) > 1:  # (the record does not carry the shape: the values as they come)
            return flat.astype(dtype, copy=False)
        return flat.reshape(tuple(-1 if d is None else d for d in shape)).astype(dtype, copy=False)
    if flat.size != count * fixed:
        expected = f"{count} step(s) of shape {shape}" if leaf.per_step else f"shape {shape}"
        raise ExportError(f"{where}: feature {leaf.path!r}: {flat.size} values, expected {expected}")
    dims = tuple(d for d in shape if d is not None)  # all of them: None is not in the shape here
    return flat.reshape((count, *dims) if leaf.per_step else dims).astype(dtype, copy=False)


def texts(leaf: Leaf, feature: FeatureValues | None, where: str) -> list[str]:
    if feature is None:
        raise ExportError(f"{where}: feature {leaf.path!r} is missing from the record")
    if feature.kind != BYTES:
        raise ExportError(f"{where}: feature {leaf.path!r}: expected text, the record holds numbers")
    return [bytes(item).decode("utf-8", errors="replace") for item in feature.bytes_items()]


def decode_image(data: memoryview, leaf: Leaf, where: str) -> np.ndarray:
    """An encoded image (PNG, JPEG, ...) as (H, W, 3) RGB uint8 or (H, W) for one channel."""
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise ExportError(f"{where}: feature {leaf.path!r}: an image that does not decode ({leaf.encoding})")
    if leaf.dtype == "float32":  # RGBA bytes are the float's, little-endian (tf.bitcast)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 4:
            raise ExportError(f"{where}: feature {leaf.path!r}: expected a float32 image bitcast to 4-channel PNG")
        return np.ascontiguousarray(cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA)).view("<f4")[..., 0]
    channels = 1 if image.ndim == 2 else image.shape[2]
    expected = leaf.shape[2] if len(leaf.shape) == 3 else channels
    if channels == 4 and expected == 3:
        image = cv2.cvtColor(image, cv2.COLOR_BGRA2RGB)
    elif channels == 3:
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    elif channels == 1 and image.ndim == 3:
        image = image[..., 0]
    if (expected == 3 and image.ndim != 3) or (expected == 1 and image.ndim != 2):
        raise ExportError(f"{where}: feature {leaf.path!r}: an image of {channels} channel(s), expected {expected}")
    if str(image.dtype) != leaf.dtype:
        raise ExportError(f"{where}: feature {leaf.path!r}: a {image.dtype} image, expected {leaf.dtype}")
    return np.ascontiguousarray(image)
