"""A run's record as the command line writes it: JSON with no NaN or infinity."""

from __future__ import annotations

import json
import math

from ..errors import GpusimError, shorten, shown


def record_json(record) -> str:
    """A record as JSON, which has no NaN or infinity: a non-finite number is an error naming its field."""
    try:
        return json.dumps(record, indent=2, allow_nan=False)
    except ValueError:
        raise GpusimError(f"the record holds a non-finite number at {non_finite_at(record)}: "
                          f"it cannot be written as JSON") from None


def write_record(path: str, text: str) -> None:
    """`text` (a record's JSON) written to the file `path` (--json's), or a one-line error naming it."""
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text + "\n")
    except OSError as exc:
        raise GpusimError(f"--json {shown(path, 60)}: cannot write ({exc.strerror or exc})") from None


def non_finite_at(value, path: str = "") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path or "the top level"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = non_finite_at(item, f"{path}[{shorten(key, 40)}]")
        if found:
            return found
    return None
