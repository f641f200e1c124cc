"""A rosbag2 directory: its ``metadata.yaml`` (split files, compression per file or per
message), or, without one (a recording that was never closed), its storage files."""

from __future__ import annotations

from pathlib import Path, PurePath

import yaml

from ortf_ros.errors import describe
from ortf_ros.format.text import read_text
from ortf_ros.pipeline.sources.base import MessageCompression, fail

STORAGE_SUFFIXES = (".db3", ".mcap", ".db3.zstd", ".mcap.zstd")
METADATA_FILE = "metadata.yaml"


def storage_files(path: Path) -> list[tuple[Path, MessageCompression]]:
    """The directory's storage files in recording order, and how their messages are compressed."""
    meta_path = path / METADATA_FILE
    if not meta_path.exists():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(STORAGE_SUFFIXES))
        if not files:
            raise fail(str(path), "not a rosbag2 directory: no metadata.yaml and no .db3 or .mcap file")
        return [(file, "detect") for file in files]
    try:
        # libyaml's loader where PyYAML has it: a split recording's metadata lists every
        # file and topic, and the pure-Python loader takes tens of milliseconds on it.
        doc = yaml.load(read_text(meta_path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        info = doc["rosbag2_bagfile_information"]
        names = [PurePath(str(x)).name for x in info["relative_file_paths"]]
        storage = str(info.get("storage_identifier", "") or "")
        mode = str(info.get("compression_mode", "") or "").lower()
        fmt = str(info.get("compression_format", "") or "").lower()
    except (OSError, yaml.YAMLError, KeyError, TypeError) as err:
        raise fail(str(meta_path), f"not valid rosbag2 metadata ({describe(err)})") from err
    if storage not in ("sqlite3", "mcap", ""):
        raise fail(str(meta_path), f"storage {storage!r} not supported, expected sqlite3 or mcap")
    if mode in ("", "none"):
        mode = ""
    elif mode not in ("file", "message"):
        raise fail(str(meta_path), f"compression mode {mode!r} not supported, expected file or message")
    elif fmt != "zstd":
        raise fail(str(meta_path), f"compression format {fmt!r} not supported, expected zstd")
    if not names:
        raise fail(str(meta_path), "lists no storage files")
    missing = [n for n in names if not (path / n).is_file()]
    if missing:
        raise fail(str(path / missing[0]), f"file missing ({meta_path.name} lists it as part of the bag)")
    # (In file mode each file is zstd as a whole, found by its magic number.)
    return [(path / name, "message" if mode == "message" else "none") for name in names]
