"""MIG slices: `load_arch("h100:3g.40gb")` is the H100 as one MIG GPU instance of profile 3g.40gb sees it.

The profiles live in arch/mig.yaml (NVIDIA's MIG user guide tables and `nvidia-smi mig -lgip` SM counts, every
number sourced there). A slice is the full part's ArchSpec, attrs.evolve'd: its SMs (and the fewest of the part's
GPCs that hold them, at least one per compute slice), memory_slices/8 of the L2 (size, slices, bandwidth) and of
the DRAM channels and bandwidth, and the profile's memory size. Per-SM limits (registers, shared memory, warp and
block slots) are the full part's, so occupancy per SM is unchanged.
"""

from __future__ import annotations

import functools
import math
import re

import attrs
from attrs import validators as v
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from ..errors import ArchError
from .load import (MIG_TABLE, arch_dir, describe_problems, join_problems, known_archs, one_line, read_yaml, shown,
                   spec_converter)
from .spec import ArchSpec, OrAbsent, TextLine, count_range, number_range, spec_field

MEMORY_SLICES = 8  # a memory slice is one eighth of the memory, its controllers and its L2 (MIG user guide)
MAX_COMPUTE_SLICES = 7
_PROFILE_NAME = re.compile(r"([1-7])g\.([0-9]{1,4})gb(\+me)?")


@attrs.frozen
class MigProfile:
    compute_slices: int = spec_field("compute (SM) slices: the <g> of <g>g.<N>gb", "slices",
                                     count_range(MAX_COMPUTE_SLICES))
    memory_slices: int = spec_field("memory slices of the 8: the share of L2 and DRAM channels and bandwidth",
                                    "slices", count_range(MEMORY_SLICES))
    sms: int = spec_field("SMs the GPU instance gets (nvidia-smi mig -lgip, SM column)", "SMs", count_range(1024))
    max_instances: int = spec_field("how many of this profile one GPU holds at once", "instances",
                                    count_range(MAX_COMPUTE_SLICES))


@attrs.frozen
class MigPart:
    product: str = spec_field("the product the profile table is for", validator=TextLine(200))
    profiles: dict[str, MigProfile] = spec_field("profile name -> profile", validator=v.instance_of(dict))
    base: str | None = spec_field("the arch file the part is built from (default: its own key)",
                                  validator=OrAbsent(TextLine(64)), default=None)
    dram_type: str | None = spec_field("memory technology, where it differs from the base arch's",
                                       validator=OrAbsent(TextLine(64)), default=None)
    dram_bandwidth_gbs: float | None = spec_field("full part's DRAM bandwidth, where it differs from the base arch's",
                                                  "GB/s", OrAbsent(number_range(1, 1_000_000)), default=None)


def _structure_table(data, source: str) -> dict[str, MigPart]:
    if not isinstance(data, dict):
        raise ArchError(f"{source}: expected a mapping of arch names to MIG profile tables")
    parts = {}
    for key, value in data.items():
        try:
            part = spec_converter().structure(value, MigPart)
        except (ClassValidationError, ForbiddenExtraKeysError) as exc:
            raise ArchError(one_line(join_problems(describe_problems(exc, str(key), data), source))) from None
        except (TypeError, ValueError) as exc:
            raise ArchError(one_line(f"{source}: {shown(key, 40)}: {exc}")) from None
        base = part.base or str(key)
        if base not in known_archs():
            raise ArchError(f"{source}: {shown(key, 40)}: base arch '{shown(base, 40)}' is not a shipped arch")
        for name, profile in part.profiles.items():
            m = _PROFILE_NAME.fullmatch(str(name))
            if m is None or int(m.group(1)) != profile.compute_slices:
                raise ArchError(f"{source}: {shown(key, 40)}.profiles.{shown(name, 40)}: expected a name "
                                f"'{profile.compute_slices}g.<GB>gb' (with '+me' for media extensions)")
        parts[str(key)] = part
    return parts


@functools.cache
def mig_table() -> dict[str, MigPart]:
    """arch/mig.yaml: MIG-capable part name -> its profile table."""
    path = arch_dir() / MIG_TABLE
    return _structure_table(read_yaml(path, ArchError), shown(path))


def mig_parts() -> list[str]:
    return sorted(mig_table())


def profile_memory_gb(name: str) -> int:
    """The memory a profile's name gives it: 3g.40gb -> 40."""
    return int(_PROFILE_NAME.fullmatch(name).group(2))


def _whole(value: int, share: float) -> int:
    return max(1, int(value * share))


def slice_spec(spec: ArchSpec, part_name: str, part: MigPart, profile_name: str) -> ArchSpec:
    """The ArchSpec of one MIG GPU instance of `profile_name` on `spec` (the part's base arch)."""
    profile = part.profiles[profile_name]
    share = profile.memory_slices / MEMORY_SLICES
    st, mem = spec.structure, spec.memory
    sms_per_gpc = st.tpcs_per_gpc * st.sms_per_tpc
    gpcs = max(profile.compute_slices, math.ceil(profile.sms / sms_per_gpc))
    l2 = attrs.evolve(mem.l2, size_bytes=_whole(mem.l2.size_bytes, share), slices=_whole(mem.l2.slices, share),
                      bandwidth_bytes_per_clock=_whole(mem.l2.bandwidth_bytes_per_clock, share))
    dram = attrs.evolve(mem.dram, type=part.dram_type or mem.dram.type,
                        capacity_gb=float(profile_memory_gb(profile_name)),
                        bandwidth_gbs=(part.dram_bandwidth_gbs or mem.dram.bandwidth_gbs) * share,
                        channels=_whole(mem.dram.channels, share))
    return attrs.evolve(
        spec, name=f"{part_name}:{profile_name}", full_name=f"{part.product}, MIG {profile_name}",
        structure=attrs.evolve(st, gpcs=gpcs, enabled_sms=profile.sms),
        memory=attrs.evolve(mem, l2=l2, dram=dram))


def _no_mig(base: str) -> str:
    from .load import load_arch

    spec = load_arch(base)
    return (f"{base} has no MIG slices: NVIDIA's MIG user guide does not list the {spec.full_name} (MIG parts "
            f"here: {', '.join(mig_parts())})")


@functools.cache
def load_mig_slice(text: str) -> ArchSpec:
    """The ArchSpec for 'part:profile' ('h100:3g.40gb'), or a one-line ArchError naming what is valid."""
    from .load import load_arch

    base, _, profile = text.partition(":")
    key, profile = base.lower(), profile.lower()
    table = mig_table()
    if key not in table:
        if key in known_archs():
            raise ArchError(f"arch '{shown(text, 60)}': {_no_mig(key)}")
        raise ArchError(f"arch '{shown(text, 60)}': unknown part '{shown(base, 40)}': MIG slices exist for "
                        f"{', '.join(mig_parts())}")
    part = table[key]
    if profile not in part.profiles:
        raise ArchError(f"arch '{shown(text, 60)}': unknown MIG profile '{shown(profile, 30)}' for {key}: expected "
                        f"one of {', '.join(part.profiles)}")
    spec = load_arch(part.base or key)
    try:
        return slice_spec(spec, key, part, profile)
    except (TypeError, ValueError) as exc:
        raise ArchError(one_line(f"arch '{shown(text, 60)}': the slice does not fit {spec.name} ({exc})")) from None


def mig_rows() -> list[dict]:
    """One row per MIG profile of every part (`gpusim archs --mig`)."""
    rows = []
    for key in mig_parts():
        part = mig_table()[key]
        for name, profile in part.profiles.items():
            spec = load_mig_slice(f"{key}:{name}")
            rows.append({
                "arch": key, "profile": name, "name": spec.name, "product": part.product,
                "compute_slices": profile.compute_slices, "memory_slices": profile.memory_slices,
                "sms": spec.sms, "gpcs": spec.structure.gpcs, "memory_gb": spec.memory.dram.capacity_gb,
                "l2_bytes": spec.memory.l2.size_bytes, "dram_channels": spec.memory.dram.channels,
                "dram_bandwidth_gbs": round(spec.memory.dram.bandwidth_gbs, 3),
                "max_instances": profile.max_instances,
            })
    return rows


def archs_without_mig() -> list[str]:
    """Shipped archs no MIG profile table is built from."""
    used = {part.base or key for key, part in mig_table().items()}
    return [name for name in known_archs() if name not in used]
