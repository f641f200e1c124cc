"""A camera's calibration file: the YAML ``camera_calibration`` writes and
``camera_info_manager`` reads, named by a mapping's ``camera_info_url``.

Many recordings have no ``camera_info`` topic (or have it for some cameras only), while
the calibration sits in a file beside the driver's launch files. A mapping names that
file as a ROS driver's ``camera_info_url`` does: ``file:///abs/calib.yaml``,
``package://PKG/calib.yaml`` (found through ``AMENT_PREFIX_PATH``, as ament does, no ROS
import), or a plain path, which a mapping file takes relative to itself.

The file is read with a YAML parser and checked field by field; every problem is one
``MappingError`` line naming the file and the field. As ``camera_calibration_parsers``
does, a file without ``distortion_model`` (older calibrations) is ``plumb_bob``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from ortf_ros.errors import MappingError, OrtfError, os_error_line
from ortf_ros.format.text import read_text
from ortf_ros.format.urdf import PACKAGE_SCHEME
from ortf_ros.pipeline.robot import split_package_uri
from ortf_ros.pipeline.samples import PinholeCalibration

FILE_SCHEME = "file://"
DEFAULT_DISTORTION_MODEL = "plumb_bob"  # camera_calibration_parsers' for a file that names none
URL_FORMS = "file:///path/calib.yaml, package://PACKAGE/path/calib.yaml or a path"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_MATRICES = {  # key -> (rows, cols); None: any number of columns (distortion models differ)
    "camera_matrix": (3, 3),
    "distortion_coefficients": (1, None),
    "rectification_matrix": (3, 3),
    "projection_matrix": (3, 4),
}
REQUIRED_KEYS = ("image_width", "image_height", "camera_matrix", "distortion_coefficients")


@dataclass(frozen=True)
class CalibrationFile(PinholeCalibration):
    """What a calibration file says of a camera (the fields a ``CameraInfo`` would carry)."""

    path: Path


def normalized_url(url: str, relative_to: Path | None) -> str:
    """The ``camera_info_url`` as a mapping keeps it: a ``package://`` URL as given, any
    other as an absolute path (``file://`` dropped; a relative one joined to
    ``relative_to``, the mapping file's directory, else the working directory).
    ValueError says what is wrong with it."""
    url = url.strip()
    if "${" in url:
        raise ValueError(f"{url!r}: camera_info_manager's ${{...}} substitutions are not supported; give a path")
    if url.startswith(PACKAGE_SCHEME):
        if split_package_uri(url) is None:
            raise ValueError(f"{url!r}: expected package://PACKAGE/path/calib.yaml inside the package")
        return url
    if url.startswith(FILE_SCHEME):
        url = url[len(FILE_SCHEME) :]
    elif _SCHEME.match(url):
        raise ValueError(f"{url!r}: unsupported URL; expected {URL_FORMS}")
    if not url:
        raise ValueError(f"expected {URL_FORMS}, got an empty path")
    path = Path(url).expanduser()
    if not path.is_absolute():
        path = (relative_to if relative_to is not None else Path.cwd()) / path
    return str(path)


def calibration_path(url: str) -> Path:
    """The file a normalized ``camera_info_url`` names; a ``package://`` one is looked up
    in the share directories of ``AMENT_PREFIX_PATH``'s prefixes, as ament's index does."""
    parts = split_package_uri(url)
    if parts is None:
        return Path(url)
    package, rel = parts
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if not prefixes:
        raise MappingError(
            f"{url}: finding a ROS package needs a sourced workspace (AMENT_PREFIX_PATH is not set); "
            "give the file's path or a file:// URL as camera_info_url"
        )
    for prefix in prefixes:
        if (Path(prefix) / "share/ament_index/resource_index/packages" / package).is_file():
            return Path(prefix) / "share" / package / rel
    raise MappingError(
        f"{url}: package {package!r} is not in AMENT_PREFIX_PATH (source its workspace, or give the file's path)"
    )


def read_calibration(url: str) -> CalibrationFile:
    """The calibration file ``url`` (normalized) names, checked."""
    path = calibration_path(url)
    try:
        text = read_text(path)
    except OSError as exc:
        raise MappingError(f"cannot read the camera calibration: {os_error_line(exc)}") from None
    except OrtfError as exc:
        raise MappingError(str(exc)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MappingError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return _calibration(path, data)


def _calibration(path: Path, data: object) -> CalibrationFile:
    def fail(key: str, problem: str) -> MappingError:
        return MappingError(f"{path}: {key}: {problem}")

    if not isinstance(data, Mapping):
        kind = "an empty file" if data is None else type(data).__name__
        raise MappingError(
            f"{path}: expected a camera calibration (image_width, image_height, camera_matrix, ...), got {kind}"
        )
    for key in REQUIRED_KEYS:
        if data.get(key) is None:
            raise fail(key, "required key is missing (a camera_calibration file has it)")
    size = {}
    for key in ("image_width", "image_height"):
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise fail(key, f"expected a positive whole number of pixels, got {value!r}")
        size[key] = value
    matrices = {key: _matrix(data[key], key, shape, fail) for key, shape in _MATRICES.items() if key in data}
    k = matrices["camera_matrix"]
    if not (k[0] > 0 and k[4] > 0):
        raise fail("camera_matrix", f"fx and fy must be positive, got {k[0]!r} and {k[4]!r} (not calibrated?)")
    model = data.get("distortion_model", DEFAULT_DISTORTION_MODEL)
    if not isinstance(model, str) or not model.strip():
        raise fail("distortion_model", f"expected a model name such as plumb_bob, got {model!r}")
    return CalibrationFile(
        path=path,
        width=size["image_width"],
        height=size["image_height"],
        k=k,
        d=matrices["distortion_coefficients"],
        distortion_model=model,
    )


def _matrix(
    value: object, key: str, shape: tuple[int, int | None], fail: Callable[[str, str], MappingError]
) -> tuple[float, ...]:
    """``{rows, cols, data}`` of the expected shape, its data finite numbers, row-major."""
    rows, cols = shape
    wanted = f"rows {rows}, cols {cols if cols is not None else 'N'}"
    if not isinstance(value, Mapping) or not {"rows", "cols", "data"} <= set(value):
        raise fail(key, f"expected a matrix {{rows, cols, data}} with {wanted}, got {value!r}")
    got_rows, got_cols, data = value["rows"], value["cols"], value["data"]
    whole = isinstance(got_cols, int) and not isinstance(got_cols, bool) and got_cols >= 0
    if isinstance(got_rows, bool) or got_rows != rows or not whole or (cols is not None and got_cols != cols):
        raise fail(key, f"expected {wanted}, got rows {got_rows!r}, cols {got_cols!r}")
    if not isinstance(data, list) or len(data) != rows * got_cols:
        count = f"{len(data)} numbers" if isinstance(data, list) else repr(data)
        raise fail(f"{key}.data", f"expected {rows * got_cols} numbers (rows {rows} x cols {got_cols}), got {count}")
    for i, number in enumerate(data):
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise fail(f"{key}.data[{i}]", f"expected a finite number, got {number!r}")
    return tuple(float(v) for v in data)
