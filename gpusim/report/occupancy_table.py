"""The occupancy calculator's summary, as a table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analytic.occupancy import OccupancyResult
from ..arch import ArchSpec


def _limit(value: int | None) -> str:
    return "no limit" if value is None else str(value)


def print_occupancy(spec: ArchSpec, r: OccupancyResult) -> None:
    carveout = "default (max)" if r.carveout is None else f"{r.carveout}%"
    title = (f"{spec.full_name} (cc {spec.compute_capability}): {r.threads_per_block} threads, "
             f"{r.regs_per_thread} regs/thread, {r.smem_per_block} B shared/block, carveout {carveout}")
    console = Console(width=120)
    console.print(title)
    table = Table(show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("Active thread blocks per SM", str(r.blocks_per_sm)),
        ("Active warps per SM", f"{r.warps_per_sm} of {r.max_warps_per_sm}"),
        ("Active threads per SM", str(r.threads_per_sm)),
        ("Occupancy", f"{100 * r.occupancy:.2f}%"),
        ("Limited by", ", ".join(r.limiters)),
        ("Block limit: warps", _limit(r.block_limit_warps)),
        ("Block limit: registers", _limit(r.block_limit_registers)),
        ("Block limit: shared memory", _limit(r.block_limit_shared_memory)),
        ("Block limit: block slots", _limit(r.block_limit_blocks)),
        ("Block limit: barriers", _limit(r.block_limit_barriers)),
        ("Registers allocated per warp", str(r.allocated_registers_per_warp)),
        ("Registers allocated per block", str(r.allocated_registers_per_block)),
        ("Shared memory allocated per block", f"{r.allocated_smem_per_block} B"),
        ("Shared memory carveout per SM", f"{r.shared_memory_per_sm // 1024} KB"),
    ]
    if r.reason:
        rows.append(("Cannot be resident", r.reason))
    for row in rows:
        table.add_row(*row)
    console.print(table)
