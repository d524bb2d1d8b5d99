"""A sweep's points: the variations (`--vary NAME=VALUES`) parsed into values, the Cartesian product of them, what
each name varies (a run option, a launch override, the arch or one of its fields, a workload parameter), and the
hardware what-ifs (`arch.sm.registers=...`: the arch spec rebuilt along the path and checked by its validators).
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from typing import Any, Iterable

from ..errors import GpusimError, one_line, shorten, shown
from ..options import size_bytes, variables


SIZE_NAMES = ("launch.smem", "launch.dynamic_smem")  # values that may be written 48K, 64KB, 1M
TEXT_NAMES = ("scheduler", "simt", "sample", "arch")  # values that are words: never a start:stop:step range
DEFAULT_METRICS = ("gpu_sim_cycle", "sm__inst_executed.avg.per_cycle_active",
                   "sm__warps_active.avg.pct_of_peak_sustained_active", "l1tex__t_sector_hit_rate.pct",
                   "lts__t_sector_hit_rate.pct", "dram__bytes.sum.per_second")
OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"  # the theoretical occupancy, in every row
LIMITER = "occupancy_limiter"  # the resource(s) that limit it, '+'-joined (gpusim.analytic.occupancy.LIMITERS)
ERROR, WALL = "error", "wall_s"
MAX_POINTS = 100_000

class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: the workers were stopped; `rows` are the finished rows (all in the output)."""

    def __init__(self, rows: list[dict], total: int, out: str | None):
        super().__init__(f"{len(rows)} of {total} points done")
        self.rows, self.total, self.out = rows, total, out


# ----------------------------------------------------------------------------------------------- variations

def parse_vary(text: str) -> tuple[str, list]:
    """'NAME=SPEC' -> (NAME, values); SPEC is 'a,b,c' or 'start:stop:step' (see parse_values)."""
    name, eq, spec = text.partition("=")
    name = name.strip()
    if not eq or not name:
        raise GpusimError(f"--vary {shown(text, 60)}: expected NAME=VALUES (VALUES a,b,c or start:stop:step)")
    return name, parse_values(name, spec)


def _number(name: str, text: str, size: bool = False):
    """'64' -> 64, '0.5' -> 0.5, '48K' -> 49152 where sizes are allowed, anything else stays text."""
    text = text.strip()
    found = size_bytes(text) if size else None
    if found is not None:
        return found
    for cast in (int, float):
        try:
            value = cast(text)
        except ValueError:
            continue
        if cast is float and not math.isfinite(value):
            raise GpusimError(f"--vary {name}: {shown(text, 40)} is not a finite number")
        return value
    return text


def _sized(name: str) -> bool:
    return name in SIZE_NAMES or (name.startswith("arch.") and name.endswith("_bytes"))


def parse_values(name: str, spec: str) -> list:
    """The values of one variation: 'a,b,c' (each an int, a float or a word; sizes such as 48K for
    launch.smem, launch.dynamic_smem and arch fields in bytes) or 'start:stop:step' (`stop` included when the
    steps land on it; integers stay integers; 'start:stop' steps by 1)."""
    text = spec.strip()
    if not text:
        raise GpusimError(f"--vary {name}=: expected values (a,b,c or start:stop:step)")
    size = _sized(name)
    if ":" in text and name not in TEXT_NAMES:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise GpusimError(f"--vary {name}={shown(text, 40)}: expected start:stop:step")
        numbers = [_number(name, p, size) for p in parts] + ([1] if len(parts) == 2 else [])
        if any(isinstance(n, str) for n in numbers):
            raise GpusimError(f"--vary {name}={shown(text, 40)}: start, stop and step must be numbers")
        start, stop, step = numbers
        if step == 0 or (stop - start) * step < 0:
            raise GpusimError(f"--vary {name}={shown(text, 40)}: the step must go from {start} towards {stop}")
        count = int(math.floor((stop - start) / step + 1e-9)) + 1
        if count > MAX_POINTS:
            raise GpusimError(f"--vary {name}={shown(text, 40)}: {count:,} values; a sweep takes at most "
                              f"{MAX_POINTS:,} points")
        if all(isinstance(n, int) for n in numbers):
            values = list(range(start, stop + (1 if step > 0 else -1), step))
        else:
            values = [float(round(start + k * step, 12)) for k in range(count)]
    else:
        items = [p.strip() for p in text.split(",")]
        if any(not p for p in items):
            raise GpusimError(f"--vary {name}={shown(text, 40)}: an empty value")
        values = [_number(name, p, size) for p in items]
    seen = set()
    for value in values:
        if value_key(value) in seen:
            raise GpusimError(f"--vary {name}: the value {shown(value, 40)} is given twice")
        seen.add(value_key(value))
    return values


def values_of(name: str, given) -> list:
    """A variation's values from Python: a SPEC string, an iterable of values or one value."""
    if isinstance(given, str):
        return parse_values(name, given)
    if isinstance(given, Iterable) and not isinstance(given, (bytes, dict)):
        values = list(given)
    else:
        values = [given]
    if not values:
        raise GpusimError(f"vary[{shorten(name, 40)}]: no values")
    if len({value_key(v) for v in values}) != len(values):
        raise GpusimError(f"vary[{shorten(name, 40)}]: a value is given twice")
    return values


def value_key(value) -> str:
    """The key a value is matched by (--resume, the plots, repeated values): numbers by value (32, 32.0 and the
    text '32' are one key, as a CSV reads them back), anything else as its text."""
    if value is None:
        return ""
    if isinstance(value, str):
        number = _as_number(value)
        if number is None:
            return value
        value = number
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _as_number(text: str):
    """'64' -> 64, '0.5' -> 0.5: a finite number written as text, else None."""
    for cast in (int, float):
        try:
            value = cast(text)
        except (ValueError, OverflowError):
            continue
        return value if cast is int or math.isfinite(value) else None
    return None


def points(vary: dict[str, list]) -> list[dict]:
    """The Cartesian product, the first variation slowest: [{name: value, ...}, ...]."""
    names = list(vary)
    return [dict(zip(names, combo)) for combo in itertools.product(*(vary[n] for n in names))]


def kind(name: str) -> str:
    """'option' (a run option: gpusim.options.RunOptions), 'arch', 'arch_field' or 'param' (a workload
    parameter)."""
    if name in variables():
        return "option"
    if name == "arch":
        return "arch"
    if name.startswith("arch."):
        return "arch_field"
    return "param"


# ----------------------------------------------------------------------------------------------- arch what-ifs

def evolve_arch(spec, changes: dict[str, Any]):
    """`spec` with its fields at `changes` ({'sm.registers': 131072, 'memory.l2.size_bytes': ...}), rebuilt with
    attrs.evolve along each path, so the spec's validators check the result. A path that names no field, or a
    value the spec refuses, is a GpusimError."""
    import attrs

    if not changes:
        return spec
    what = ", ".join(f"arch.{path}={shown(value, 40)}" for path, value in changes.items())
    tree: dict = {}
    for path, value in changes.items():
        node, parts = tree, path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise GpusimError(f"{what}: arch.{path} is inside a field that is also given a value")
        if isinstance(node.get(parts[-1]), dict):
            raise GpusimError(f"{what}: arch.{path} is a group of fields that is also given a value")
        node[parts[-1]] = value

    def evolve(obj, node: dict, where: str):
        fields = attrs.fields_dict(type(obj))
        updates = {}
        for name, sub in node.items():
            if name not in fields:
                raise GpusimError(f"{what}: {where} has no field {shorten(name, 40)} (it has: {', '.join(fields)})")
            current = getattr(obj, name)
            nested = attrs.has(type(current))
            if isinstance(sub, dict):
                if not nested:
                    raise GpusimError(f"{what}: {where}.{name} is a value, not a group of fields")
                updates[name] = evolve(current, sub, f"{where}.{name}")
            elif nested:
                inner = ", ".join(attrs.fields_dict(type(current)))
                raise GpusimError(f"{what}: {where}.{name} is a group of fields; name one (it has: {inner})")
            else:
                updates[name] = _coerce(current, sub)
        try:
            return attrs.evolve(obj, **updates)
        except (ValueError, TypeError) as exc:
            raise GpusimError(f"{what}: {where}: {one_line(str(exc))}") from None

    return evolve(spec, tree, "arch")


def _coerce(current, value):
    """A what-if value in the field's own type where that is unambiguous (true/false, an int for a float)."""
    if isinstance(current, bool) and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def check_names(vary: dict, workload, kernel_params: dict | None) -> None:
    """Every varied name means something: a run option, the arch or a field of it, a parameter of the workload."""
    for name in vary:
        if not isinstance(name, str) or not name:
            raise GpusimError(f"--vary {shorten(name, 40)}: expected a name")
        what = kind(name)
        if what == "arch_field" and not re.fullmatch(r"arch(\.[A-Za-z_][A-Za-z0-9_]*)+", name):
            raise GpusimError(f"--vary {shown(name, 60)}: expected arch.<field>.<field> (see gpusim archs --fields)")
        if what == "param":
            if kernel_params is None:
                raise GpusimError(f"--vary {shown(name, 40)}: {workload} is a trace: it has no parameters to vary "
                                  f"({', '.join(variables())}, arch and arch.<field> may be varied)")
            if name not in kernel_params:
                raise GpusimError(f"--vary {shown(name, 40)}: not a parameter of {workload} (its parameters: "
                                  f"{', '.join(kernel_params) or 'none'}; or {', '.join(variables())}, arch, "
                                  f"arch.<field>)")


def plain_value(value):
    """A metric as a row holds it: int, float or str; a non-finite number (or none) is None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) or hasattr(value, "__float__"):
        value = float(value)
        return value if math.isfinite(value) else None
    return str(value)
