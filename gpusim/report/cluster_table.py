"""Thread block cluster occupancy, as a summary line and a table of GPCs."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analytic.clusters import ClusterOccupancyResult


def print_clusters(r: ClusterOccupancyResult) -> None:
    x, y, z = r.cluster_dims
    console = Console(width=120)
    portability = "non-portable size allowed" if r.non_portable else "portable sizes"
    console.print(f"Clusters of {x}x{y}x{z} = {r.cluster_size} blocks ({portability}, at most "
                  f"{r.max_cluster_size}), each cluster on distinct SMs of one GPC")
    console.print(f"  max active clusters: {r.max_active_clusters} ({r.active_blocks} blocks of the "
                  f"{r.resident_blocks} that {r.sms} SMs x {r.blocks_per_sm} per SM hold without clusters)")
    if r.reason:
        console.print(f"  {r.reason}")
    table = Table()
    for name in ("GPC", "SMs", "block slots", "clusters", "unused slots"):
        table.add_column(name, justify="right")
    for g in r.per_gpc:
        table.add_row(str(g.gpc), str(g.sms), str(g.block_slots), str(g.clusters), str(g.unused_block_slots))
    console.print(table)
