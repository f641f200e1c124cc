"""Reading the dataset's small JSON files with one error type for every way they can be bad."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(root: Path, path: str) -> Any:
    """Parsed JSON; raises FileNotFoundError, or ValueError saying why the file is unusable."""
    try:
        return json.loads((root / path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
