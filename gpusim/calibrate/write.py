"""Write a calibrated arch file: the base file's layout (its keys in its order, its flow mappings on one line) with
the calibrated values, and on every value's line a comment saying where the value comes from (gpusim.arch.
provenance reads it: a comment starting with R, or `key R` on a one-line mapping, marks a value assumed)."""

from __future__ import annotations

import json
import re
from datetime import date

from ..arch.load import LineDict
from .derive import ASSUMED, KEPT, Calibration, plain

COMMENT_COLUMN = 42


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return json.dumps(str(value))


def _kept_text(cal: Calibration, comment: str, assumed: bool) -> str:
    """A kept value's comment: the base's own where it describes this product, else marked R (carried over)."""
    if not assumed:
        return comment or f"as {cal.base_name}"
    base = plain(re.sub(r"^R(?![\w-])[:\s]*", "", comment).strip()) if comment else ""
    if comment.startswith("R") and not comment[1:2].isalnum():
        return f"R: as {cal.base_name}, assumed there" + (f": {base}" if base else "")
    return f"R: as {cal.base_name}" + (f" ({base})" if base else "")


def _single_comment(cal: Calibration, path: str) -> str:
    entry = cal.entries[path]
    if entry.kind == KEPT:
        return _kept_text(cal, entry.text, entry.assumed)
    return entry.text  # measured: "[CAL] ..."; derived: "D: ..."; assumed here: "R: ..."


def _flow_comment(cal: Calibration, prefix: str, keys: list[str], base_comment: str) -> str:
    """One comment for a one-line mapping: what was measured per key, and `key R` for each assumed one."""
    entries = {k: cal.entries[f"{prefix}{k}"] for k in keys}
    kept = [k for k, e in entries.items() if e.kind == KEPT]
    if len(kept) == len(keys):  # nothing on this line was measured
        flags = [entries[k].assumed for k in keys]
        if all(flags):
            return _kept_text(cal, base_comment, True)
        return base_comment or f"as {cal.base_name}"  # the same product: its comment marks what it assumes
    parts = []
    for key, entry in entries.items():
        if entry.kind not in (KEPT, ASSUMED):
            parts.append(f"{key}: {plain(entry.text)}")
    assumed = [k for k in keys if entries[k].kind == ASSUMED or entries[k].kind == KEPT and entries[k].assumed]
    sourced = [k for k in kept if k not in assumed]
    if sourced:
        parts.append(f"{', '.join(sourced)} as {cal.base_name} ({plain(base_comment)})")
    for key in assumed:
        why = entries[key].text.removeprefix("R:").strip() if entries[key].kind == ASSUMED else f"as {cal.base_name}"
        parts.append(f"{key} R: {plain(why)}")
    return "; ".join(parts)


def _line(indent: int, text: str, comment: str) -> str:
    body = " " * indent + text
    if not comment:
        return body
    return f"{body.ljust(COMMENT_COLUMN - 2)}  # {comment}"


def _tree(cal: Calibration) -> dict:
    """The calibrated values as a nested dict in the base file's key order (keys the base lacks appended)."""
    tree: dict = {}
    for path, entry in cal.entries.items():
        node = tree
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = entry.value

    def order(node, base):
        if not isinstance(node, dict):
            return node
        keys = [k for k in (base or {}) if k in node] + [k for k in node if k not in (base or {})]
        return {k: order(node[k], base.get(k) if isinstance(base, dict) else None) for k in keys}

    return order(tree, cal.base_data)


def _is_flow(base, key) -> bool:
    """Whether the base file writes this mapping on its key's line; a new mapping of scalars is written so too."""
    if isinstance(base, LineDict) and isinstance(base.get(key), LineDict):
        return base[key].line == base.key_lines[key]
    return base is None or not isinstance(base, dict) or key not in base


def render(cal: Calibration) -> str:
    """The calibrated arch file's text."""
    r = cal.results
    header = [
        f"# {r.device}: calibrated by `gpusim calibrate` on {date.today().isoformat()} from microbenchmark results of "
        f"{r.date}",
        f"# (driver {r.driver}; {plain(r.binary)}; results: {plain(str(r.source))}).",
        "# [CAL] = measured on that device by validation/microbench.cu (the kernel named); D: = derived from measured",
        f"# values; every other value is the base file's ({cal.base_file.name})"
        + (", the same product: its sources below" if cal.same_product else
           ", another part: marked R (assumed), with the base's source"),
        "# R marks a value as assumed: a comment that starts with R marks every value on its line; `key R` in the",
        "# comment of a {...} line marks that key alone. `gpusim archs --assumed` lists them for shipped files.",
        f"# The base file's sources ({cal.base_file.name}):",
    ]
    for line in cal.base_file.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append("#   " + line.lstrip("#").strip())
    out = list(header)
    tree = _tree(cal)

    def emit(node: dict, base, prefix: str, indent: int) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            sub_base = base.get(key) if isinstance(base, dict) else None
            if isinstance(value, dict):
                if all(not isinstance(v, dict) for v in value.values()) and _is_flow(base, key):
                    flow = "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"
                    base_comment = _base_line_comment(cal, path)
                    out.append(_line(indent, f"{key}: {flow}", _flow_comment(cal, f"{path}.", list(value),
                                                                             base_comment)))
                else:
                    out.append(_line(indent, f"{key}:", ""))
                    emit(value, sub_base, path + ".", indent + 2)
            else:
                out.append(_line(indent, f"{key}: {_scalar(value)}", _single_comment(cal, path)))

    emit(tree, cal.base_data, "", 0)
    return "\n".join(out) + "\n"


def _base_line_comment(cal: Calibration, path: str) -> str:
    """The base file's comment on the line of the mapping at `path` ('' for a mapping the base lacks)."""
    return cal.base_comments.get(path + ".", "")
