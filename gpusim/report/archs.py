"""`gpusim archs`: one row per shipped architecture with its derived peaks."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..arch import known_archs, load_arch


def arch_rows() -> list[dict]:
    rows = []
    for name in known_archs():
        spec = load_arch(name)
        rows.append({
            "name": spec.name,
            "full_name": spec.full_name,
            "compute_capability": spec.compute_capability,
            "sms": spec.sms,
            "core_mhz": spec.clocks.core_mhz,
            "tensor_mhz": spec.clocks.tensor_mhz,
            "peak_fp32_tflops": round(spec.peak_fp32_tflops, 2),
            "peak_fp16_tensor_tflops": round(spec.peak_fp16_tensor_tflops, 1),
            "dram_bandwidth_gbs": spec.memory.dram.bandwidth_gbs,
            "l2_bytes": spec.memory.l2.size_bytes,
        })
    return rows


def print_arch_table(rows: list[dict]) -> None:
    table = Table(title="gpusim architectures (peaks derived from lanes x SMs x clock)")
    for col, just in (("name", "left"), ("product", "left"), ("CC", "right"), ("SMs", "right"),
                      ("clock MHz", "right"), ("FP32 TFLOPS", "right"), ("FP16 TC TFLOPS", "right"),
                      ("DRAM GB/s", "right"), ("L2 MB", "right")):
        table.add_column(col, justify=just)
    for r in rows:
        clock = f"{r['core_mhz']:g}" if r["core_mhz"] == r["tensor_mhz"] else f"{r['core_mhz']:g} / {r['tensor_mhz']:g} TC"
        table.add_row(r["name"], r["full_name"], r["compute_capability"], str(r["sms"]), clock,
                      f"{r['peak_fp32_tflops']:.1f}", f"{r['peak_fp16_tensor_tflops']:.1f}",
                      f"{r['dram_bandwidth_gbs']:g}", f"{r['l2_bytes'] / 2**20:g}")
    Console(width=140).print(table)


def field_rows() -> list[dict]:
    """Every field of an arch file, nested ones as dotted paths: its unit, accepted range and description (the
    schema `load_arch` validates against)."""
    import attrs

    from ..arch.spec import ArchSpec

    rows = []

    def walk(cls, prefix: str) -> None:
        for a in attrs.fields(attrs.resolve_types(cls)):
            if isinstance(a.type, type) and attrs.has(a.type):
                walk(a.type, f"{prefix}{a.name}.")
                continue
            rows.append({"field": prefix + a.name, "unit": a.metadata.get("unit", ""),
                         "range": a.metadata.get("range", ""), "description": a.metadata.get("doc", "")})

    walk(ArchSpec, "")
    return rows


def print_field_table(rows: list[dict]) -> None:
    table = Table(title="arch file fields (every number in arch/*.yaml is checked against its range)")
    for col in ("field", "unit", "range", "description"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["field"], r["unit"], r["range"], r["description"])
    Console(highlight=False).print(table)
