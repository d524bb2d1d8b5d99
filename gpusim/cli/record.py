"""A run's record as the command line writes it: JSON with no NaN or infinity."""

from __future__ import annotations

import json
import math

from ..errors import GpusimError, shorten


def record_json(record) -> str:
    """A record as JSON, which has no NaN or infinity: a non-finite number is an error naming its field."""
    try:
        return json.dumps(record, indent=2, allow_nan=False)
    except ValueError:
        raise GpusimError(f"the record holds a non-finite number at {non_finite_at(record)}: "
                          f"it cannot be written as JSON") from None


def non_finite_at(value, path: str = "") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path or "the top level"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = non_finite_at(item, f"{path}[{shorten(key, 40)}]")
        if found:
            return found
    return None
