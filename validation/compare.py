"""Compare real-hardware microbenchmark results (validation/results/*.json) with what gpusim's engine simulates.

    python validation/compare.py validation/results/h200-2026-11-29.json --arch h200 [--how] [--jobs N]

For every measured quantity the matching kernel (a workload mirroring the CUDA kernel in microbench.cu) is
simulated on the architecture given, and the engine's output is compared, not the architecture file's numbers.
Timed loops are measured as the hardware measures them with clock64 around a long loop: as a marginal cost,
the difference between two simulations that differ only in the loop's length, so start-up, warm-up and drain
cancel. validation/README.md lists what each row simulates. A row whose quantity gpusim does not model (the constant
cache, the TLB, DRAM write-back pressure on a write-only stream) is printed, marked, and left out of the mean.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from gpusim import load_arch
from gpusim.api import run
from gpusim.errors import GpusimError

HERE = Path(__file__).resolve().parent
MICROBENCH = HERE.parent / "workloads/microbench"
OWN = HERE / "workloads"  # kernels that mirror microbench.cu where no shipped workload does

FLOP_PER_HMMA_16816 = 2 * 16 * 8 * 16  # m16n8k16: 4096 FLOP per warp-instruction
SMEM_STRIDES = (1, 2, 3, 4, 8, 16, 32, 33)
LONG_SPIN = 100_000  # occupancy rows with shorter spins retire blocks before the first wave is placed
RESIDENT = "gpusim__max_resident_blocks_per_sm"  # the engine's most blocks running at once on one SM


@dataclass(frozen=True)
class Row:
    key: str  # stable identifier (the tests' tolerance table is keyed by it)
    quantity: str
    measured: float  # mean over the results file's runs
    simulated: float
    how: str  # what was simulated
    modelled: bool = True  # False: shown, not in the mean error (`note` says why)
    note: str = ""

    @property
    def ratio(self) -> float:
        if self.measured == 0:
            return 1.0 if self.simulated == 0 else float("inf")
        return self.simulated / self.measured

    @property
    def error_pct(self) -> float:
        """|simulated / measured - 1| in percent; a quantity measured as 0 is right (0) or wrong (100)."""
        if self.measured == 0:
            return 0.0 if self.simulated == 0 else 100.0
        return abs(self.ratio - 1) * 100


# --- simulations ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sim:
    """One engine run: a workload, its parameters and how many SMs (None: the whole chip)."""

    workload: Path
    sms: int | None
    params: tuple[tuple[str, int], ...]
    residency: bool = False  # a residency row: a launch the engine refuses is 0 resident blocks
    cost: float = field(default=0.0, compare=False)  # rough relative cost, to start the long runs first


def simulate(arch: str, sim: Sim) -> dict:
    """The run's metrics (for a residency row, {RESIDENT: 0} where the engine refuses the launch)."""
    try:
        return run(sim.workload, arch, sms=sim.sms, params=dict(sim.params)).metrics
    except GpusimError as exc:
        if sim.residency and "cannot be resident" in str(exc):
            return {RESIDENT: 0}
        raise


def _simulate_task(task: tuple[str, Sim]) -> dict:
    return simulate(*task)


@dataclass(frozen=True)
class Plan:
    """A row before its simulations ran: `value` turns their metrics (in `sims` order) into the simulated figure."""

    key: str
    quantity: str
    measured: float
    how: str
    sims: tuple[Sim, ...]
    value: Callable[[list[dict]], float]
    modelled: bool = True
    note: str = ""


Metrics = dict
Get = Callable[[Metrics], float]


def _sim(workload: Path, sms: int | None, cost: float = 0.0, residency: bool = False, **params) -> Sim:
    return Sim(workload, sms, tuple(sorted(params.items())), residency, cost)


def _cycles(m: Metrics) -> float:
    return m["gpu_sim_cycle"]


def _seconds(m: Metrics) -> float:
    return m["gpu__time_duration.sum"]


def _instructions(m: Metrics) -> float:
    return m["smsp__inst_executed.sum"]


def _pipe(name: str) -> Get:
    return lambda m: m.get(f"sm__inst_executed_pipe_{name}.sum", 0)


def _bytes_requested(m: Metrics) -> float:
    """Bytes the kernel's global loads and stores asked for (32-byte sectors at L1): what microbench.cu counts."""
    return 32 * (m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
                 + m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"])


def marginal(workload: Path, sms: int | None, vary: str, short: int, long: int, numerator: Get, denominator: Get,
             cost: float = 0.0, **params) -> tuple[tuple[Sim, Sim], Callable[[list[dict]], float]]:
    """Two runs whose parameter `vary` is `short` and `long`, and d(numerator) / d(denominator) between them:
    the cost of the extra loop trips alone, as clock64 around a long loop measures it on the hardware."""
    sims = (_sim(workload, sms, cost, **{**params, vary: short}),
            _sim(workload, sms, cost * long / short, **{**params, vary: long}))

    def value(m: list[dict]) -> float:
        return (numerator(m[1]) - numerator(m[0])) / (denominator(m[1]) - denominator(m[0]))

    return sims, value


def _scaled(pair, factor: float):
    sims, value = pair
    return sims, lambda m: value(m) * factor


# --- the rows ------------------------------------------------------------------------------------------------

def _core_plans(mean) -> list[Plan]:
    fp32, tensor = _pipe("fma"), _pipe("tensor")
    sms = 4
    return [
        Plan("ffma_latency", "dependent FFMA latency (cycles)", mean(lambda r: r["ffma_dependent_latency_cycles"]),
             "fma_chain n=1024 vs 2048, 1 warp: d(cycles)/d(FFMA)",
             *marginal(MICROBENCH / "fma_chain.yaml", 1, "n", 1024, 2048, _cycles, fp32)),
        Plan("ffma_throughput", "FFMA warp-inst per clock per SM", mean(lambda r: r["ffma_warp_inst_per_clock_per_sm"]),
             f"fma_peak 2 x 1024 threads per SM, 8 chains, {sms} SMs, iters 16 vs 32: d(FFMA)/d(cycles)/SM",
             *_scaled(marginal(MICROBENCH / "fma_peak.yaml", sms, "iters", 16, 32, fp32, _cycles,
                               blocks=2 * sms, threads=1024, chains=8), 1 / sms)),
        Plan("hmma_latency", "dependent HMMA.16816.F32 latency (cycles)",
             mean(lambda r: r["hmma_16816_f32_dependent_latency_cycles"]),
             "hmma_peak 1 warp, 1 chain, iters 64 vs 128: d(cycles)/d(HMMA)",
             *marginal(MICROBENCH / "hmma_peak.yaml", 1, "iters", 64, 128, _cycles, tensor,
                       blocks=1, threads=32, chains=1)),
        Plan("hmma_throughput", "HMMA (mma.sync) FP16 FLOP per clock per SM",
             mean(lambda r: r["hmma_16816_flop_per_clock_per_sm"]),
             f"hmma_peak 2 x 512 threads per SM, 4 chains, {sms} SMs, iters 16 vs 32: 4096 d(HMMA)/d(cycles)/SM",
             *_scaled(marginal(MICROBENCH / "hmma_peak.yaml", sms, "iters", 16, 32, tensor, _cycles,
                               blocks=2 * sms, threads=512, chains=4), FLOP_PER_HMMA_16816 / sms)),
    ]


def _chase_plans(mean) -> list[Plan]:
    """One thread walks the footprint in 128-byte steps; L1 and L2 are timed after one warm pass over the
    footprint (as on the hardware), DRAM cold. The engine's L1 keeps no line of an 8 MiB walk (no .cg needed)."""
    plans = []
    for level, label, short, long in (("l1", "L1", 256, 512), ("l2", "L2", 512, 1024), ("dram", "DRAM", 2048, 4096)):
        footprint = int(mean(lambda r, lv=level: r["pointer_chase"][lv]["footprint_bytes"]))
        warm = footprint // 128 if level != "dram" else 0
        plans.append(Plan(f"chase_{level}", f"{label} pointer chase, {footprint >> 10} KiB (cycles/hop)",
                          mean(lambda r, lv=level: r["pointer_chase"][lv]["cycles_per_hop"]),
                          f"pointer_chase {footprint} B, {warm} warm hops, then {short} vs {long}: d(cycles)/d(hops)",
                          *marginal(MICROBENCH / "pointer_chase.yaml", 1, "hops", warm + short, warm + long,
                                    _cycles, _instructions, cost=warm / 16000, footprint=footprint, stride=128)))
    return plans


def _smem_plans(mean) -> list[Plan]:
    return [Plan(f"smem_stride_{s}", f"shared load, stride {s}: SM cycles per warp-load",
                 mean(lambda r, s=str(s): r["smem_cycles_per_warp_load_by_stride"][s]),
                 f"smem_load_stride stride={s}, 32 warps, 1 SM, iters 16 vs 32: d(cycles)/d(LDS)",
                 # the kernel's only LSU instructions are its LDS
                 *marginal(OWN / "smem_load_stride.yaml", 1, "iters", 16, 32, _cycles, _pipe("lsu"),
                           stride=s, warps=32))
            for s in SMEM_STRIDES]


def _stream_plans(mean, arch: str) -> list[Plan]:
    """Full chip, microbench.cu's kernels as written: 8 blocks of 256 threads per SM, one float4 per thread per
    grid-stride trip. GB/s = bytes the kernel reads and writes / time, marginal over trips. The read is steady
    from its second trip; the copy only once the write-back L2 (60 MB) is full and evictions write back as much
    as the kernel writes, as through a 1 GiB copy on the hardware: trips 12 to 14 (50 to 58 MiB copied) come
    within 1.5% of longer copies (1% higher than trips 14 to 16)."""
    blocks, threads, unroll = 8 * load_arch(arch).sms, 256, 1
    trip = 4 * unroll * blocks * threads  # floats per grid-stride trip
    plans = []
    for key, label, read, (short, long) in (("stream_read", "DRAM stream read bandwidth (GB/s)", 1, (2, 4)),
                                            ("stream_copy", "DRAM stream copy bandwidth (GB/s)", 0, (12, 14))):
        plans.append(Plan(key, label, mean(lambda r, k=f"{key}_gbs": r[k]),
                          f"stream read={read} unroll=1, {blocks} x {threads}, full chip, {short} vs {long} trips "
                          f"of {trip * 4 / 2**20:.1f} MiB read: d(bytes)/d(time)",
                          *_scaled(marginal(MICROBENCH / "stream.yaml", None, "n", short * trip, long * trip,
                                            _bytes_requested, _seconds, cost=short * (2 - read),
                                            blocks=blocks, threads=threads, unroll=unroll, read=read), 1e-9)))
    return plans


def _occupancy_plans(results: dict, mean) -> list[Plan]:
    plans = []
    for i, case in enumerate(results["runs"][0]["occupancy"]):
        if case["spin_cycles"] < LONG_SPIN:
            continue
        smem = case["static_smem"] + case["dynamic_smem"]
        sim = _sim(OWN / "resident_spin.yaml", 2, residency=True, threads=case["threads"], regs=case["regs"],
                   smem=smem, blocks=80)
        plans.append(Plan(f"blocks_{case['threads']}t_{case['regs']}r_{smem >> 10}k",
                          f"blocks/SM: {case['threads']} thr, {case['regs']} regs, {smem >> 10} KB smem",
                          mean(lambda r, i=i: r["occupancy"][i]["measured_blocks_per_sm"]),
                          "resident_spin, 40 blocks per SM, 2 SMs: most blocks running at once on an SM",
                          (sim,), lambda m: m[0][RESIDENT]))
    return plans


# --- the marginal-cost rows (microbench.cu's later kernels; present only in results that measured them) --------

WGMMA_SHAPES = {  # precision -> (opcode in wgmma_rate.yaml's order, FLOP per warpgroup MMA)
    "fp16": (0, 2 * 64 * 128 * 16), "bf16": (1, 2 * 64 * 128 * 16), "tf32": (2, 2 * 64 * 128 * 8),
    "fp8": (3, 2 * 64 * 128 * 32), "int8": (4, 2 * 64 * 128 * 32)}
NO_CONSTANT_CACHE = "gpusim has no constant cache (a constant load takes the L1-hit latency) and no arch field for it"
NO_TLB = "gpusim has no TLB (an access costs the same at any footprint)"
WRITE_BACK_UNTHROTTLED = ("gpusim's write-back L2 takes stores at its own rate: the DRAM write-backs of evicted lines "
                          "hold no store back, so a write-only stream runs at the L2's bandwidth")
MMA_SYNC_PRECISIONS = {"bf16": 1, "tf32": 2, "int8": 3, "fp8": 4}  # mma_rate.yaml's precision parameter (fp16: the
# HMMA throughput row above)


def _tensor_flop(m: Metrics) -> float:
    return m["gpusim__tensor_flop.sum"]


def _l2_chip_share(arch: str, sms: int) -> float:
    """The whole chip's L2 slices over those a run on `sms` SMs keeps (gpusim.memory.hierarchy: round(slices x
    sms / SMs), at least one): the factor from that run's L2 bandwidth to the chip's."""
    spec = load_arch(arch)
    used = max(1, round(spec.memory.l2.slices * min(1.0, sms / spec.sms)))
    return spec.memory.l2.slices / used


def _has(results: dict, key: str) -> bool:
    return all(key in r for r in results["runs"])


def marginal_plans(results: dict, mean, arch: str) -> list[Plan]:
    """A row for each later microbench.cu measurement the results file holds (none for older files)."""
    plans: list[Plan] = []
    insts, cycles = _instructions, _cycles
    if _has(results, "smem_latency_cycles"):
        plans.append(Plan("smem_latency", "shared-memory load latency (cycles/hop)",
                          mean(lambda r: r["smem_latency_cycles"]), "smem_latency 256 vs 512 hops: d(cycles)/d(LDS)",
                          *marginal(OWN / "smem_latency.yaml", 1, "hops", 256, 512, cycles, insts)))
    if _has(results, "const_latency_cycles"):
        plans.append(Plan("const_latency", "constant-cache load latency (cycles/hop)",
                          mean(lambda r: r["const_latency_cycles"]), "const_latency 256 vs 512 hops: d(cycles)/d(LDC)",
                          *marginal(OWN / "const_latency.yaml", 1, "hops", 256, 512, cycles, insts),
                          modelled=False, note=NO_CONSTANT_CACHE))
    if _has(results, "tlb") and len(results["runs"][0]["tlb"]["points"]) >= 2:
        stride = results["runs"][0]["tlb"]["page_stride_bytes"]
        points = results["runs"][0]["tlb"]["points"]
        small, big = points[0]["footprint_bytes"], points[-1]["footprint_bytes"]

        def cost(r, i):
            return r["tlb"]["points"][i]["cycles_per_hop"]

        chases = []
        for footprint in (small, big):
            pages = footprint // stride
            # one line past each page boundary: lines exactly 2 MiB apart would share one set of the engine's L2
            chases.append(marginal(MICROBENCH / "pointer_chase.yaml", 1, "hops", pages + 256, pages + 512, cycles,
                                   insts, cost=pages / 16000, footprint=footprint, stride=stride + 128))
        plans.append(Plan("tlb_miss", f"TLB: {big >> 20} vs {small >> 20} MiB, 2 MiB pages (cycles/hop)",
                          mean(lambda r: cost(r, -1) - cost(r, 0)),
                          f"pointer_chase stride {stride} + 128, a warm pass then 256 vs 512 hops at both footprints: "
                          f"the difference of their cycles per hop",
                          chases[0][0] + chases[1][0],
                          lambda m: chases[1][1](m[2:]) - chases[0][1](m[:2]), modelled=False, note=NO_TLB))
    if _has(results, "atomic_same_address_cycles_per_update"):
        plans.append(Plan("atomic_same_address", "same-address atomics: cycles per update",
                          mean(lambda r: r["atomic_same_address_cycles_per_update"]),
                          "atomic_rate spread=0, 4 x 1024 threads, 4 SMs, iters 8 vs 16: d(cycles)/d(32 x RED)",
                          *_scaled(marginal(OWN / "atomic_rate.yaml", 4, "iters", 8, 16, cycles, insts,
                                            blocks=4, threads=1024, spread=0), 1 / 32)))
    if _has(results, "atomic_spread_updates_per_clock_per_sm"):
        plans.append(Plan("atomic_spread", "atomics, one address per thread: updates/clk/SM",
                          mean(lambda r: r["atomic_spread_updates_per_clock_per_sm"]),
                          "atomic_rate spread=1, 4 x 1024 threads, 4 SMs, iters 32 vs 64: d(32 x RED)/d(cycles)/SM",
                          *_scaled(marginal(OWN / "atomic_rate.yaml", 4, "iters", 32, 64, insts, cycles,
                                            blocks=4, threads=1024, spread=1), 32 / 4)))
    if _has(results, "smem_bytes_per_clock_per_sm"):
        plans.append(Plan("smem_bandwidth", "shared-memory bandwidth (B/clk/SM)",
                          mean(lambda r: r["smem_bytes_per_clock_per_sm"]),
                          "smem_bandwidth 32 warps, 1 SM, iters 16 vs 32: 512 d(LDS.128)/d(cycles)",
                          *_scaled(marginal(OWN / "smem_bandwidth.yaml", 1, "iters", 16, 32, insts, cycles), 256)))
    if _has(results, "l1_bytes_per_clock_per_sm"):
        plans.append(Plan("l1_bandwidth", "L1 load bandwidth, 16 KiB (B/clk/SM)",
                          mean(lambda r: r["l1_bytes_per_clock_per_sm"]),
                          "load_bandwidth words=1024, 32 warps, 1 SM, iters 16 vs 32: d(bytes)/d(cycles)",
                          *marginal(OWN / "load_bandwidth.yaml", 1, "iters", 16, 32, _bytes_requested, cycles)))
    if _has(results, "l2_bytes_per_clock_one_sm"):
        plans.append(Plan("l2_bandwidth_sm", "L2 load bandwidth, one SM (B/clk)",
                          mean(lambda r: r["l2_bytes_per_clock_one_sm"]),
                          "load_bandwidth 8 MiB, one block of 32 warps (8 SMs' share of L2), iters 256 vs 512: "
                          "d(bytes)/d(cycles)",
                          *marginal(OWN / "load_bandwidth.yaml", 8, "iters", 256, 512, _bytes_requested, cycles,
                                    cost=1.0, words=(8 << 20) // 16, blocks=1)))
    if _has(results, "l2_bytes_per_clock"):
        sms = 16
        plans.append(Plan("l2_bandwidth", "L2 load bandwidth, every SM (B/clk)",
                          mean(lambda r: r["l2_bytes_per_clock"]),
                          f"load_bandwidth 2 MiB, 2 blocks of 32 warps on each of {sms} SMs, iters 64 vs 128: "
                          f"d(bytes)/d(cycles), scaled from the run's L2 slices to the chip's",
                          *_scaled(marginal(OWN / "load_bandwidth.yaml", sms, "iters", 64, 128, _bytes_requested,
                                            cycles, cost=4.0, words=(2 << 20) // 16, blocks=2 * sms),
                                   _l2_chip_share(arch, sms))))
    if _has(results, "stream_write_gbs"):
        blocks, threads = 8 * load_arch(arch).sms, 256
        trip = 4 * blocks * threads
        plans.append(Plan("stream_write", "DRAM stream write bandwidth (GB/s)", mean(lambda r: r["stream_write_gbs"]),
                          f"stream_write {blocks} x {threads}, full chip, 16 vs 18 trips of {trip * 4 / 2**20:.1f} "
                          f"MiB (the write-back L2 full): d(bytes)/d(time)",
                          *_scaled(marginal(OWN / "stream_write.yaml", None, "n", 16 * trip, 18 * trip,
                                            _bytes_requested, _seconds, cost=16, blocks=blocks, threads=threads),
                                   1e-9), modelled=False, note=WRITE_BACK_UNTHROTTLED))
    if _has(results, "mma_sync_flop_per_clock_per_sm"):
        measured = results["runs"][0]["mma_sync_flop_per_clock_per_sm"]
        for precision, index in MMA_SYNC_PRECISIONS.items():
            if precision not in measured:
                continue
            plans.append(Plan(f"mma_sync_{precision}", f"mma.sync {precision.upper()} FLOP per clock per SM",
                              mean(lambda r, p=precision: r["mma_sync_flop_per_clock_per_sm"][p]),
                              f"mma_rate precision={index}, 2 x 512 threads per SM, 4 chains, 4 SMs, iters 16 vs 32: "
                              f"d(tensor FLOP)/d(cycles)/SM",
                              *_scaled(marginal(OWN / "mma_rate.yaml", 4, "iters", 16, 32, _tensor_flop, cycles,
                                                blocks=8, threads=512, chains=4, precision=index), 1 / 4)))
    if _has(results, "wgmma_flop_per_clock_per_sm"):
        measured = results["runs"][0]["wgmma_flop_per_clock_per_sm"]
        for precision, (index, _flop) in WGMMA_SHAPES.items():
            if precision not in measured:
                continue

            def per_max_clock(r, p=precision):
                """FLOP per SM per cycle of the part's maximum clock: the rate at the clock the run held (the SM
                slows under tensor load), in the engine's unit (simulated time runs at the maximum clock)."""
                return (r["wgmma_flop_per_clock_per_sm"][p] * r["sm_clock_mhz_during_wgmma"]
                        / r["reported_max_clock_mhz"])

            plans.append(Plan(f"wgmma_{precision}", f"wgmma {precision.upper()} FLOP per max-clock cycle per SM",
                              mean(per_max_clock),
                              f"wgmma_rate precision={index}, 2 blocks of 2 warpgroups per SM, 2 SMs, iters 8 vs 16: "
                              f"d(tensor FLOP)/d(cycles)/SM",
                              *_scaled(marginal(OWN / "wgmma_rate.yaml", 2, "iters", 8, 16, _tensor_flop, cycles,
                                                blocks=4, threads=256, precision=index), 1 / 2)))
    if _has(results, "sfu_ex2_dependent_latency_cycles"):
        plans.append(Plan("sfu_latency", "dependent MUFU.EX2 latency (cycles)",
                          mean(lambda r: r["sfu_ex2_dependent_latency_cycles"]),
                          "sfu_rate 1 thread, 1 chain, iters 16 vs 32: d(cycles)/d(MUFU)",
                          *marginal(OWN / "sfu_rate.yaml", 1, "iters", 16, 32, cycles, insts)))
    if _has(results, "sfu_ex2_warp_inst_per_clock_per_sm"):
        plans.append(Plan("sfu_throughput", "MUFU.EX2 warp-inst per clock per SM",
                          mean(lambda r: r["sfu_ex2_warp_inst_per_clock_per_sm"]),
                          "sfu_rate 2 x 1024 threads, 8 chains of 4, 1 SM, iters 8 vs 16: d(MUFU)/d(cycles)",
                          *marginal(OWN / "sfu_rate.yaml", 1, "iters", 8, 16, insts, cycles,
                                    blocks=2, threads=1024, chains=8, per_chain=4)))
    if _has(results, "block_launch_cycles"):
        smem = load_arch(arch).shared_memory.per_block_optin_bytes
        plans.append(Plan("block_launch", "block launch, one block per SM at a time (cycles)",
                          mean(lambda r: r["block_launch_cycles"]),
                          "block_launch 32 threads, all the opt-in shared memory, 2 SMs, 16 vs 32 blocks per SM: "
                          "d(cycles)/d(blocks per SM)",
                          *_scaled(marginal(OWN / "block_launch.yaml", 2, "per_sm", 16, 32, cycles, insts,
                                            smem=smem), 4)))
    return plans


def comparison_plans(results: dict, arch: str) -> list[Plan]:
    """Every measured quantity of a results file and the simulations that reproduce it (nothing run yet)."""
    runs = results["runs"]

    def mean(get):
        return sum(get(r) for r in runs) / len(runs)

    return (_core_plans(mean) + _chase_plans(mean) + _smem_plans(mean) + _stream_plans(mean, arch)
            + _occupancy_plans(results, mean) + marginal_plans(results, mean, arch))


def run_plans(plans: list[Plan], arch: str, jobs: int | None = None) -> list[Row]:
    """Run every plan's simulations (each distinct one once, `jobs` at a time, longest first) into rows."""
    sims = sorted({s for p in plans for s in p.sims}, key=lambda s: -s.cost)
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1:
        with ProcessPoolExecutor(min(jobs, len(sims))) as pool:
            metrics = dict(zip(sims, pool.map(_simulate_task, [(arch, s) for s in sims])))
    else:
        metrics = {s: simulate(arch, s) for s in sims}
    return [Row(p.key, p.quantity, p.measured, p.value([metrics[s] for s in p.sims]), p.how, p.modelled, p.note)
            for p in plans]


def comparison_rows(results: dict, arch: str, jobs: int | None = None) -> list[Row]:
    """Every measured quantity of a results file beside the engine's simulation of the matching kernel."""
    return run_plans(comparison_plans(results, arch), arch, jobs)


def mean_absolute_error(rows: list[Row]) -> float:
    """Over the rows the engine models (a row whose quantity has no arch field is shown, not counted)."""
    counted = [r for r in rows if r.modelled] or rows
    return sum(r.error_pct for r in counted) / len(counted)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--arch", required=True)
    parser.add_argument("--how", action="store_true", help="print what each row simulated")
    parser.add_argument("--jobs", type=int, default=None, help="simulations at once (default: one per CPU)")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    started = time.perf_counter()
    rows = comparison_rows(results, args.arch, args.jobs)
    print(f"{'quantity':48} {'measured':>10} {'simulated':>10} {'sim/measured':>13}")
    for row in rows:
        ratio = f"{row.ratio:.3f}" if row.measured else ("-" if row.simulated == 0 else "inf")
        print(f"{row.quantity:48} {row.measured:10.2f} {row.simulated:10.2f} {ratio:>13}"
              + ("" if row.modelled else "  (not in the mean)"))
        if args.how:
            print(f"    {row.how}")
    print(f"{len(rows)} rows simulated on {args.arch} in {time.perf_counter() - started:.0f} s")
    for note in dict.fromkeys(r.note for r in rows if not r.modelled):
        print(f"not in the mean: {', '.join(r.key for r in rows if not r.modelled and r.note == note)}: {note}")
    print(f"mean absolute error: {mean_absolute_error(rows):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
