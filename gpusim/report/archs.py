"""`gpusim archs`: one row per shipped architecture with its derived peaks (tensor peaks by precision too), the
arch-file schema (`--fields`) and the MIG profiles (`--mig`)."""

from __future__ import annotations

import types
import typing

from rich.console import Console
from rich.table import Table

from ..arch import known_archs, load_arch
from ..isa.tensor import PRECISIONS, tensor_rate


def tensor_rows(spec) -> tuple[dict, dict]:
    """(rates, tflops): per precision, {dense, sparse} FLOP/clk/SM (None where the part has no such path), and the
    dense peak in TFLOPS (TOPS for integers) = rate x SMs x tensor clock."""
    rates, tflops = {}, {}
    for precision in PRECISIONS:
        dense, sparse = tensor_rate(spec, precision), tensor_rate(spec, precision, sparse=True)
        rates[precision] = None if dense is None else {"dense": dense, "sparse": sparse}
        tflops[precision] = None if dense is None else round(dense * spec.sms * spec.clocks.tensor_mhz * 1e6 / 1e12, 1)
    return rates, tflops


def arch_rows() -> list[dict]:
    rows = []
    for name in known_archs():
        spec = load_arch(name)
        rates, tflops = tensor_rows(spec)
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
            "tensor_rates": rates,  # FLOP (integers: operations) per clock per SM at tensor_mhz; null: no such path
            "tensor_tflops": tflops,  # dense peaks
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
    console = Console(width=140)
    console.print(table)
    console.print(_tensor_table(rows))


def _tensor_table(rows: list[dict]) -> Table:
    table = Table(title="tensor-core peaks by input precision: dense TFLOPS (INT: TOPS); 'x2 sp' = 2:4 sparsity "
                        "doubles it; - = no tensor path", title_justify="left")
    table.add_column("name")
    for precision in PRECISIONS:
        table.add_column(precision.upper(), justify="right")
    for r in rows:
        cells = []
        for precision in PRECISIONS:
            rate, tflops = r["tensor_rates"][precision], r["tensor_tflops"][precision]
            if rate is None:
                cells.append("-")
                continue
            sparse = rate["sparse"]
            note = "" if sparse is None else " x2 sp" if sparse == 2 * rate["dense"] else f" x{sparse / rate['dense']:.2g} sp"
            cells.append(f"{tflops:g}{note}")
        table.add_row(r["name"], *cells)
    return table


def print_mig_table(rows: list[dict], without: list[str]) -> None:
    table = Table(title="MIG profiles (arch/mig.yaml; use as --arch ARCH:PROFILE)", title_justify="left")
    for col in ("arch:profile", "SMs", "GPCs", "compute", "memory", "memory GB", "L2 MB", "DRAM GB/s",
                "instances"):
        table.add_column(col, justify="left" if col == "arch:profile" else "right")
    for r in rows:
        table.add_row(r["name"], str(r["sms"]), str(r["gpcs"]), f"{r['compute_slices']}/7", f"{r['memory_slices']}/8",
                      f"{r['memory_gb']:g}", f"{r['l2_bytes'] / 2**20:g}", f"{r['dram_bandwidth_gbs']:g}",
                      str(r["max_instances"]))
    console = Console(width=140, highlight=False)
    console.print(table)
    if without:
        console.print(f"no MIG: {', '.join(without)} (NVIDIA's MIG user guide lists none of them)")


def _attrs_class(tp):
    """The attrs class a field holds, also inside `X | None`; None for plain values."""
    import attrs

    if isinstance(tp, type):
        return tp if attrs.has(tp) else None
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return inner[0] if len(inner) == 1 and isinstance(inner[0], type) and attrs.has(inner[0]) else None
    return None


def field_rows() -> list[dict]:
    """Every field of an arch file, nested ones as dotted paths: its unit, accepted range and description (the
    schema `load_arch` validates against)."""
    import attrs

    from ..arch.spec import ArchSpec

    rows = []

    def walk(cls, prefix: str) -> None:
        for a in attrs.fields(attrs.resolve_types(cls)):
            nested = _attrs_class(a.type)
            if nested is not None:
                if nested is not a.type:  # an optional group: list it, then its fields
                    rows.append({"field": prefix + a.name, "unit": "", "range": a.metadata.get("range", ""),
                                 "description": a.metadata.get("doc", "")})
                walk(nested, f"{prefix}{a.name}.")
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
