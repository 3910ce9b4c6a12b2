"""Writing the sampling policy's state files (learned models, the LLM budget's spend): versioned JSON,
written atomically (a temporary file beside it, then a rename), so a crash mid-write never leaves a torn
file for the next start to read."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["write_json_atomically"]


def write_json_atomically(path: Path, state: Any) -> None:
    """Replace `path` with `state` as JSON. Raises OSError (the caller logs it: the service goes on)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(state, out)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
