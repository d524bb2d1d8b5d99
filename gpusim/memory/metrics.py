"""The memory hierarchy's metrics at the end of a kernel: its counters by their Nsight Compute names (gpusim__
where Nsight has none), with the rates, hit rates and mean latencies made from them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .levels import DRAM, L1, L2, L2_IN_FLIGHT

if TYPE_CHECKING:
    from .hierarchy import MemoryHierarchy


def hierarchy_metrics(m: MemoryHierarchy, cycles: int) -> dict:
    """The metrics of a kernel that ran `cycles` cycles on the hierarchy `m`."""
    # write-backs queued near the end can finish after the last warp: measure bandwidth over DRAM's busy window
    window = max(float(cycles), m.dram_busy_until)
    seconds = window / m.clock_hz if window else 0.0
    conflicts = m.smem_conflicts_ld + m.smem_conflicts_st + m.smem_conflicts_atom
    dram = m.dram_read + m.dram_write
    dsmem_bytes = sum(m.dsmem_sectors) * m.sector  # (its rate: speed_of_light's SM-to-SM bytes)

    def pct(a, b):
        return 100.0 * a / b if b else 0.0

    def avg(level):
        return m.latency_sum[level] / m.latency_count[level] if m.latency_count[level] else 0.0

    return {
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": m.ld_requests,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": m.ld_sectors,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": m.st_sectors,
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": m.st_requests,
        "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum": m.atom_requests,
        "l1tex__t_sector_hit_rate.pct": pct(m.ld_sector_hits, m.ld_sectors),
        "gpusim__sectors_per_request_global_ld": m.ld_sectors / m.ld_requests if m.ld_requests else 0.0,
        "gpusim__l1_mshr_merged_sectors": m.l1_merged,
        "gpusim__l2_pending_merged_sectors": m.l2_merged,
        **({"gpusim__l2_recent_fill_hit_sectors": m.l2_recent_hits} if m.recent_window else {}),
        "gpusim__atomic_lane_updates": m.atomic_updates,
        "gpusim__atomic_sectors": m.atom_sectors,
        "l1tex__data_pipe_lsu_wavefronts.sum": m.data_wavefronts,
        "l1tex__data_pipe_lsu_wavefronts.avg.per_cycle_elapsed": (
            m.data_wavefronts / (cycles * len(m.l1s)) if cycles else 0.0),
        "gpusim__l1_to_l2_bytes": m.port_bytes,
        "lts__t_sectors.sum": m.l2_sectors,
        "lts__t_sector_hit_rate.pct": pct(m.l2_hits, m.l2_sectors),
        "dram__bytes_read.sum": m.dram_read,
        "dram__bytes_write.sum": m.dram_write,
        "dram__bytes.sum": dram,
        "dram__bytes.sum.per_second": dram / seconds if seconds else 0.0,
        "gpusim__l2_dirty_bytes_at_end": m.dirty_bytes(),
        "gpusim__l2_capacity_bytes": sum(cache.capacity_bytes for cache in m.l2_caches()),
        **({} if m.shadow is None else m.shadow.metrics()),
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": m.smem_wavefronts,
        "gpusim__l1tex_data_wavefronts_async": m.async_wavefronts,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": conflicts,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": m.smem_conflicts_ld,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": m.smem_conflicts_st,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum": m.smem_conflicts_atom,
        "gpgpu_n_shmem_bkconflict": conflicts,
        "gpusim__l1_capacity_bytes": m.l1_bytes,
        "gpusim__mshr_full_events": m.mshr_full_events,
        "gpusim__memory_insts_without_addresses": m.no_address,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum": m.ldgsts_requests,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum": m.ldgsts_sectors,
        "gpusim__bulk_copies": m.bulk_copies,
        "gpusim__bulk_copy_bytes": m.bulk_bytes,
        "gpusim__bulk_copy_multicast_bytes": m.bulk_multicast_bytes,
        "l1tex__t_requests_pipe_lsu_mem_dshared_op_ld.sum": m.dsmem_requests[0],
        "l1tex__t_requests_pipe_lsu_mem_dshared_op_st.sum": m.dsmem_requests[1],
        "l1tex__t_requests_pipe_lsu_mem_dshared_op_atom.sum": m.dsmem_requests[2],
        "l1tex__t_sectors_pipe_lsu_mem_dshared_op_ld.sum": m.dsmem_sectors[0],
        "l1tex__t_sectors_pipe_lsu_mem_dshared_op_st.sum": m.dsmem_sectors[1],
        "l1tex__t_sectors_pipe_lsu_mem_dshared_op_atom.sum": m.dsmem_sectors[2],
        "l1tex__t_bytes_pipe_lsu_mem_dshared.sum": dsmem_bytes,
        "gpusim__load_latency_l1_hit": avg(L1),
        "gpusim__load_latency_l2_hit": avg(L2),
        "gpusim__load_latency_l2_in_flight": avg(L2_IN_FLIGHT),
        "gpusim__load_latency_dram": avg(DRAM),
    }
