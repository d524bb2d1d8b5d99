"""From microbenchmark results and a base arch file to the values of a calibrated arch file.

Every field of the base file gets an `Entry`: measured (a figure of the results, with the microbenchmark that
measured it), derived (computed from measured figures, "D:"), or kept (the base file's value: carried over from
another part it is assumed, "R"; from the same product it keeps its source). `MEASURED` lists what each
measurement sets, for `gpusim calibrate --dry-run`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..arch.load import LineDict, arch_dir, known_archs, read_yaml
from ..arch.provenance import field_notes
from ..errors import ArchError, GpusimError, shown
from .results import Results

MEASURED, DERIVED, KEPT, ASSUMED = "measured", "derived", "kept", "assumed"

# What microbench.cu measures and the fields each measurement sets: (results key, kernel, fields).
SUSTAINED_CLOCK = "sm_clock_mhz_sustained_wgmma_fp16"  # microbench.cu: {random_operands, zero_operands, warm_seconds}
MEASUREMENTS: tuple[tuple[str, str, str], ...] = (
    ("device, compute_capability", "cudaGetDeviceProperties", "full_name, compute_capability"),
    ("reported_max_clock_mhz", "cudaDevAttrClockRate", "clocks.core_mhz"),
    ("sm_clock_mhz_during_wgmma", "wgmma_throughput (sm_90a)", "clocks.tensor_mhz"),
    ("sm_clock_mhz_sustained_wgmma_fp16 (random operands), else sm_clock_mhz_during_wgmma, sm_clock_mhz_during_hmma",
     "wgmma_throughput after seconds on random operands, else wgmma_throughput, hmma_throughput",
     "clocks.sustained_tensor_mhz"),
    ("memory_clock_mhz, memory_bus_width_bits", "cudaDevAttrMemoryClockRate, GlobalMemoryBusWidth",
     "clocks.memory_note, memory.dram.bandwidth_gbs"),
    ("sms", "cudaDeviceProp.multiProcessorCount", "structure.enabled_sms"),
    ("warp_size, max_threads_per_sm, max_blocks_per_sm, max_threads_per_block, registers_per_sm, "
     "registers_per_block", "cudaGetDeviceProperties",
     "sm.warp_size, max_threads, max_warps, max_blocks, max_threads_per_block, registers, registers_per_block"),
    ("shared_memory_per_sm, shared_memory_per_block, shared_memory_per_block_optin, "
     "reserved_shared_memory_per_block", "cudaGetDeviceProperties",
     "shared_memory.per_sm_bytes, per_block_default_bytes, per_block_optin_bytes, reserved_per_block_bytes"),
    ("smem_cycles_per_warp_load_by_stride[32]", "smem_stride", "shared_memory.banks"),
    ("smem_bytes_per_clock_per_sm", "smem_bandwidth", "shared_memory.bank_width_bytes"),
    ("ffma_dependent_latency_cycles", "ffma_latency", "pipelines.fp32.latency"),
    ("ffma_warp_inst_per_clock_per_sm", "ffma_throughput", "pipelines.fp32.lanes"),
    ("sfu_ex2_dependent_latency_cycles", "sfu_latency", "pipelines.sfu.latency"),
    ("sfu_ex2_warp_inst_per_clock_per_sm", "sfu_throughput", "pipelines.sfu.lanes"),
    ("hmma_16816_f32_dependent_latency_cycles", "hmma_latency", "pipelines.tensor.latency"),
    ("hmma_16816_flop_per_clock_per_sm", "hmma_throughput",
     "pipelines.tensor.warp_mma_flops_per_clock (the dense peak where no wgmma row is measured)"),
    ("wgmma_flop_per_clock_per_sm", "wgmma_throughput (sm_90a)",
     "pipelines.tensor.dense_fp16_flops_per_clock, pipelines.tensor.rates.*.dense"),
    ("mma_sync_flop_per_clock_per_sm", "mma_throughput", "pipelines.tensor.rates.*.dense (where no wgmma row is)"),
    ("block_launch_cycles", "empty_block", "frontend.block_retire_cycles (less the base's block_launch_cycles)"),
    ("pointer_chase.l1", "chase<true> 16 KiB", "memory.l1.hit_latency"),
    ("smem_latency_cycles", "smem_latency", "memory.l1.shared_latency"),
    ("l2_bytes", "cudaDeviceProp.l2CacheSize", "memory.l2.size_bytes"),
    ("pointer_chase.l2", "chase<false> 8 MiB", "memory.l2.hit_latency"),
    ("l2_bytes_per_clock", "load_bandwidth<false> (every SM)", "memory.l2.bandwidth_bytes_per_clock"),
    ("l2_bytes_per_clock_one_sm", "load_bandwidth<false> (one SM)", "memory.l2.sm_bytes_per_clock"),
    ("atomic_same_address_cycles_per_update", "atomic_rate", "memory.l2.atomic_cycles_per_address_update"),
    ("global_memory_bytes", "cudaDeviceProp.totalGlobalMem", "memory.dram.capacity_gb"),
    ("pointer_chase.dram", "chase<false> 512 MiB, cold", "memory.dram.latency"),
    ("stream_read_gbs", "read_kernel", "memory.dram.read_efficiency"),
    ("stream_copy_gbs (stream_write_gbs without it)", "copy_kernel (write_kernel)", "memory.dram.write_efficiency"),
    ("const_latency_cycles, tlb, l1_bytes_per_clock_per_sm, atomic_spread_updates_per_clock_per_sm, "
     "occupancy, stream_write_gbs", "const_latency, tlb_chase, load_bandwidth<true>, atomic_rate, resident, "
                                    "write_kernel", "no field: validation/compare.py compares the engine with them"),
)

_MODEL = re.compile(r"\b([A-Z]{1,3}\d{2,4}[A-Z]?)\b")
_R_TOKEN = re.compile(r"(?<![\w\[\].-])R(?![\w-])")  # a stand-alone R: it would read as an 'assumed' marker


def plain(text: str) -> str:
    """Comment text that marks nothing: a stand-alone R (gpusim.arch.provenance's marker) becomes '(R)'."""
    return _R_TOKEN.sub("(R)", text)


@dataclass
class Entry:
    value: object
    kind: str  # MEASURED, DERIVED, KEPT or ASSUMED (set here from the base's values, not measured: "R: why")
    text: str = ""  # measured / derived / assumed: what and how; kept: the base file's comment
    assumed: bool = False  # kept: marked R (assumed in the base, or carried over from another part)


def base_path(base: str) -> Path:
    """The file of a shipped arch name or the path given."""
    text = str(base)
    if text.endswith((".yaml", ".yml")) or "/" in text:
        path = Path(text)
        if not path.is_file():
            raise ArchError(f"--base {shown(text)}: no such file")
        return path
    if text.lower() not in known_archs():
        raise ArchError(f"--base {shown(text, 40)}: unknown arch (expected one of {', '.join(known_archs())} or a "
                        f"path to a .yaml file)")
    return arch_dir() / f"{text.lower()}.yaml"


def model_of(name: str) -> str | None:
    """The product's model token: 'H200' in 'NVIDIA H200 SXM 141GB' and 'NVIDIA H200'."""
    m = _MODEL.search(name.upper())
    return m.group(1) if m else None


def default_base(results: Results) -> str:
    """The shipped arch for the same model (by its full_name), else one of the same compute capability (the
    nearest SM count), else a one-line error asking for --base."""
    from ..arch.load import load_arch

    model = model_of(results.device)
    same_cc = []
    for name in known_archs():
        try:
            spec = load_arch(name)
        except GpusimError:
            continue
        if model and model_of(spec.full_name) == model:
            return name
        if spec.compute_capability == str(results.first("compute_capability")):
            same_cc.append((abs(spec.sms - int(results.first("sms") or 0)), name))
    if same_cc:
        return min(same_cc)[1]
    raise GpusimError(f"no shipped arch of compute capability {results.first('compute_capability')} to start "
                      f"from: give --base NAME|FILE")


def leaves(data, prefix=""):
    """(dotted path, value) of every non-mapping value in a nested mapping, in order."""
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from leaves(value, path + ".")
        else:
            yield path, value


class Calibration:
    """The calibrated file's values: `entries[dotted field]`, starting from the base file's."""

    def __init__(self, results: Results, base: str, name: str):
        self.results, self.base_name = results, base
        self.base_file = base_path(base)
        self.base_data: LineDict = read_yaml(self.base_file, ArchError)
        from ..arch.load import load_arch_file

        self.base_spec = load_arch_file(self.base_file)
        self.same_product = model_of(self.base_spec.full_name) == model_of(results.device) is not None
        notes = {f: (c, a) for f, c, a in field_notes(self.base_file)}
        self.base_comments: dict[str, str] = {}  # "a.b." -> the comment on the line of mapping a.b (first key's)
        for field, (comment, _assumed) in notes.items():
            self.base_comments.setdefault(field.rsplit(".", 1)[0] + ".", comment)
        self.entries: dict[str, Entry] = {}
        for path, value in leaves(self.base_data):
            comment, assumed = notes.get(path, ("", False))
            self.entries[path] = Entry(value, KEPT, comment, assumed or not self.same_product)
        self.measured_keys: list[str] = []
        self._derive(name)

    # --- reading the values ------------------------------------------------------------------------------
    def get(self, path: str):
        return self.entries[path].value if path in self.entries else None

    def put(self, path: str, value, text: str, kind: str = MEASURED) -> None:
        self.entries[path] = Entry(value, kind, text)

    def drop(self, path: str) -> None:
        self.entries.pop(path, None)

    def _where(self, kernel: str) -> str:
        return self.results.where(kernel)

    def _mean(self, *path):
        return self.results.mean(*path)

    # --- the fields ------------------------------------------------------------------------------------------
    def _derive(self, name: str) -> None:
        r, put = self.results, self.put
        props = self._where("cudaGetDeviceProperties")
        put("name", name, "the file's stem", DERIVED)
        put("full_name", r.device, f"{props}: name")
        put("compute_capability", str(r.first("compute_capability")), f"{props}: major.minor")
        self._clocks()
        self._structure()
        self._sm()
        self._shared_memory()
        self._pipelines()
        self._memory()
        turn = self._mean("block_launch_cycles")  # a block's turn on an SM: its retirement and the next launch
        if turn is not None:
            launch = self.base_spec.frontend.block_launch_cycles
            put("frontend.block_retire_cycles", max(0, round(turn) - launch),
                f"{self._where('empty_block')}: {turn:.0f} cycles per block, one resident per SM, 64 vs 128 per SM, "
                f"less the {launch} of block_launch_cycles (assumed)", DERIVED)

    def _clocks(self) -> None:
        r = self.results
        core = self._mean("reported_max_clock_mhz")
        if core is not None:
            self.put("clocks.core_mhz", _num(core), f"{self._where('cudaDevAttrClockRate')}: maximum SM clock")
        tensor = self._mean("sm_clock_mhz_during_wgmma")
        if tensor is not None:
            self.put("clocks.tensor_mhz", _num(round(tensor)),
                     f"{self._where('wgmma_throughput')}: the SM clock while the tensor cores ran at their peak "
                     f"({tensor:.0f} MHz, from clock64 over event time)")
        loaded = {name: self._mean(f"sm_clock_mhz_during_{name}") for name in ("wgmma", "hmma")}
        loaded = {name: mhz for name, mhz in loaded.items() if mhz is not None}
        self._check_sustained_clocks()
        held = self._mean(SUSTAINED_CLOCK, "random_operands")
        zeros = self._mean(SUSTAINED_CLOCK, "zero_operands")
        ceiling = core if core is not None else self.get("clocks.core_mhz")

        def within_core(mhz: float) -> float:  # a loaded clock above the maximum is the timers' rounding
            return min(mhz, ceiling) if isinstance(ceiling, (int, float)) else mhz

        if held is not None:  # seconds of wgmma on random data: the power a real GEMM draws (zeros draw less)
            held = within_core(held)
            self.put("clocks.sustained_tensor_mhz", _num(round(held)),
                     f"{self._where('wgmma_throughput')}: the SM clock the part held after seconds of FP16 wgmma "
                     f"on random operands on every SM ({held:.0f} MHz"
                     + (f"; on zero operands {zeros:.0f} MHz)" if zeros is not None else ")"))
        elif loaded:
            name, mhz = min(loaded.items(), key=lambda item: item[1])
            self.put("clocks.sustained_tensor_mhz", _num(round(within_core(mhz))),
                     f"{self._where(f'{name}_throughput')}: the SM clock the part held while its tensor cores ran "
                     f"flat out ({', '.join(f'{k} {v:.0f} MHz' for k, v in loaded.items())}: the lower)")
        mem, bus = self._mean("memory_clock_mhz"), self._mean("memory_bus_width_bits")
        smi = r.machine.get("clocks.max.memory [MHz]")
        if mem and bus:
            self.put("clocks.memory_note", f"{mem:.0f} MHz memory clock, {bus:.0f}-bit bus",
                     f"{self._where('cudaDevAttrMemoryClockRate, cudaDevAttrGlobalMemoryBusWidth')}")
        elif isinstance(smi, str) and smi.strip():
            self.put("clocks.memory_note", f"{smi.strip()} maximum memory clock",
                     f"[CAL] {r.device}, driver {r.driver}, {r.date}: nvidia-smi clocks.max.memory")

    def _check_sustained_clocks(self) -> None:
        """microbench's sustained-clock row, where a run has it, holds a clock in MHz for each kind of operand."""
        for i, run in enumerate(self.results.runs):
            entry = run.get(SUSTAINED_CLOCK)
            if entry is None:
                continue
            for key in ("random_operands", "zero_operands"):
                value = entry.get(key) if isinstance(entry, dict) else None
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                    raise GpusimError(f"{self.results.source}: runs[{i}].{SUSTAINED_CLOCK}.{key}: expected a clock in "
                                      f"MHz (a positive number), got {shown(repr(value), 40)}")

    def _structure(self) -> None:
        sms = self.results.first("sms")
        if not isinstance(sms, int) or sms < 1:
            return
        self.put("structure.enabled_sms", sms, f"{self._where('cudaGetDeviceProperties')}: multiProcessorCount")
        tpcs, per_tpc = self.get("structure.tpcs_per_gpc"), self.get("structure.sms_per_tpc")
        gpcs = self.get("structure.gpcs")
        if gpcs * tpcs * per_tpc < sms:  # the base's die is smaller: as many GPCs as the SMs need
            self.put("structure.gpcs", math.ceil(sms / (tpcs * per_tpc)),
                     f"R: enough GPCs of {self.base_name}'s {tpcs} x {per_tpc} SMs for the {sms} SMs measured",
                     ASSUMED)

    def _sm(self) -> None:
        props = self._where("cudaGetDeviceProperties")
        for key, field in (("warp_size", "sm.warp_size"), ("max_threads_per_sm", "sm.max_threads"),
                           ("max_blocks_per_sm", "sm.max_blocks"),
                           ("max_threads_per_block", "sm.max_threads_per_block"),
                           ("registers_per_sm", "sm.registers"), ("registers_per_block", "sm.registers_per_block")):
            value = self.results.first(key)
            if isinstance(value, int) and value > 0:
                self.put(field, value, f"{props}: {key}")
        warp = self.get("sm.warp_size")
        if self.entries["sm.max_threads"].kind == MEASURED:
            self.put("sm.max_warps", self.get("sm.max_threads") // warp,
                     f"D: max_threads / warp_size, both {props}", DERIVED)

    def _shared_memory(self) -> None:
        r, props = self.results, self._where("cudaGetDeviceProperties")
        for key, field in (("shared_memory_per_sm", "per_sm_bytes"),
                           ("shared_memory_per_block", "per_block_default_bytes"),
                           ("shared_memory_per_block_optin", "per_block_optin_bytes"),
                           ("reserved_shared_memory_per_block", "reserved_per_block_bytes")):
            value = r.first(key)
            if isinstance(value, int) and value >= 0:
                self.put(f"shared_memory.{field}", value, f"{props}: {key}")
        per_sm = self.get("shared_memory.per_sm_bytes")
        steps = list(self.get("shared_memory.carveout_steps_kb"))
        if steps[-1] * 1024 != per_sm:  # the carveouts end at the measured maximum
            steps = [s for s in steps if s * 1024 < per_sm] + [per_sm // 1024]
            self.put("shared_memory.carveout_steps_kb", steps,
                     f"R: {self.base_name}'s carveout steps below the measured per-SM maximum, and that maximum",
                     ASSUMED)
        if per_sm > self.get("shared_memory.unified_l1_bytes"):
            self.put("shared_memory.unified_l1_bytes", per_sm, "R: at least the measured shared memory per SM", ASSUMED)
        conflicts = r.mean("smem_cycles_per_warp_load_by_stride", "32")
        if conflicts is not None and _power_of_two(round(conflicts)):
            self.put("shared_memory.banks", round(conflicts),
                     f"{self._where('smem_stride')}: stride 32 costs {conflicts:.2f} wavefronts (gcd(32, banks))")
        bandwidth = r.mean("smem_bytes_per_clock_per_sm")
        if bandwidth is not None:
            banks = self.get("shared_memory.banks")
            width = _nearest_power_of_two(bandwidth / banks)
            self.put("shared_memory.bank_width_bytes", width,
                     f"{self._where('smem_bandwidth')}: {bandwidth:.1f} B/clk/SM conflict-free (banks x width)")

    def _pipelines(self) -> None:
        r, put = self.results, self.put
        sub = self.get("sm.sub_partitions")
        warp = self.get("sm.warp_size")
        latency = r.mean("ffma_dependent_latency_cycles")
        if latency is not None:
            put("pipelines.fp32.latency", max(1, round(latency)),
                f"{self._where('ffma_latency')}: {latency:.3f} cycles per dependent FFMA")
        rate = r.mean("ffma_warp_inst_per_clock_per_sm")
        if rate:
            interval = max(1, round(sub / rate))
            put("pipelines.fp32.lanes", _num(warp / interval),
                f"{self._where('ffma_throughput')}: {rate:.3f} warp-inst/clk/SM = one per {interval} clk per "
                f"sub-partition")
        latency = r.mean("sfu_ex2_dependent_latency_cycles")
        if latency is not None:
            put("pipelines.sfu.latency", max(1, round(latency)),
                f"{self._where('sfu_latency')}: {latency:.2f} cycles per dependent MUFU.EX2")
        rate = r.mean("sfu_ex2_warp_inst_per_clock_per_sm")
        if rate:
            interval = max(1, round(sub / rate))
            put("pipelines.sfu.lanes", _num(warp / interval),
                f"{self._where('sfu_throughput')}: {rate:.3f} MUFU.EX2 warp-inst/clk/SM = one per {interval} clk per "
                f"sub-partition")
        latency = r.mean("hmma_16816_f32_dependent_latency_cycles")
        if latency is not None:
            put("pipelines.tensor.latency", max(1, round(latency)),
                f"{self._where('hmma_latency')}: {latency:.2f} cycles per dependent mma.sync m16n8k16")
        self._tensor_rates(sub)

    def _tensor_rates(self, sub: int) -> None:
        r, put = self.results, self.put
        core = self.get("clocks.core_mhz")
        tensor_clock = self.get("clocks.tensor_mhz")
        scale = min(1.0, tensor_clock / core)  # the engine's tensor rate per core clock: peak x this
        old_dense = self.get("pipelines.tensor.dense_fp16_flops_per_clock")
        wgmma = r.first("wgmma_flop_per_clock_per_sm")
        wgmma = wgmma if isinstance(wgmma, dict) and r.has("wgmma_flop_per_clock_per_sm", "fp16") else None
        hmma = r.mean("hmma_16816_flop_per_clock_per_sm")
        ratios: dict[str, tuple[float, str]] = {}  # precision -> (its rate over FP16's, the measurement)
        if wgmma is not None:
            fp16 = r.mean("wgmma_flop_per_clock_per_sm", "fp16")
            dense = max(1, round(fp16 / sub))
            put("pipelines.tensor.dense_fp16_flops_per_clock", dense,
                f"{self._where('wgmma_throughput')}: wgmma m64n128k16 FP16 {fp16:.0f} FLOP/clk/SM")
            for precision in wgmma:
                value = r.mean("wgmma_flop_per_clock_per_sm", precision)
                if value and precision != "fp16":
                    ratios[precision] = (value / fp16, f"{self._where('wgmma_throughput')}: {value:.0f} FLOP/clk/SM")
            if hmma is not None:
                self._warp_mma(hmma, sub, dense * scale)
        elif hmma is not None:
            warp_rate = hmma / sub
            if warp_rate >= 0.9 * old_dense * scale:  # mma.sync reaches the peak (before Hopper): it is the peak
                dense = max(1, round(warp_rate / scale))
                put("pipelines.tensor.dense_fp16_flops_per_clock", dense,
                    f"{self._where('hmma_throughput')}: mma.sync m16n8k16 {hmma:.0f} FLOP/clk/SM, the peak (no wgmma)")
                self.drop("pipelines.tensor.warp_mma_flops_per_clock")
            else:
                self._warp_mma(hmma, sub, old_dense * scale)
            mma = r.first("mma_sync_flop_per_clock_per_sm")
            if isinstance(mma, dict) and r.has("mma_sync_flop_per_clock_per_sm", "fp16"):
                fp16 = r.mean("mma_sync_flop_per_clock_per_sm", "fp16")
                for precision in mma:
                    value = r.mean("mma_sync_flop_per_clock_per_sm", precision)
                    if value and precision != "fp16":
                        ratios[precision] = (value / fp16, f"{self._where('mma_throughput')}: mma.sync {value:.0f} "
                                                           f"FLOP/clk/SM")
        dense = self.get("pipelines.tensor.dense_fp16_flops_per_clock")
        if dense == old_dense and not ratios:
            return
        fp16_rate = sub * dense
        old_fp16 = self.get("pipelines.tensor.rates.fp16.dense")
        if old_fp16 is None and not ratios:
            return
        for path in [p for p in self.entries if p.startswith("pipelines.tensor.rates.") and p.endswith(".dense")]:
            precision = path.split(".")[3]
            if precision == "fp16":
                put(path, fp16_rate, "D: sm.sub_partitions x dense_fp16_flops_per_clock (the engine's FP16 peak)",
                    DERIVED)
            elif precision not in ratios and old_fp16:
                self.put(path, max(1, round(self.get(path) * fp16_rate / old_fp16)),
                         f"R: {self.base_name}'s rate over its FP16 rate, times the FP16 rate measured", ASSUMED)
        for precision, (ratio, text) in ratios.items():
            if precision in ("fp16", "bf16", "tf32", "fp8", "fp6", "fp4", "int8", "int4"):
                put(f"pipelines.tensor.rates.{precision}.dense", max(1, round(ratio * fp16_rate)),
                    f"{text} = {ratio:.3f} x FP16")
        for path in [p for p in self.entries if p.startswith("pipelines.tensor.rates.") and p.endswith(".sparse")]:
            precision = path.split(".")[3]
            dense_path = f"pipelines.tensor.rates.{precision}.dense"
            old = self.entries[path]
            base_dense, new_dense = _base_value(self.base_data, dense_path), self.get(dense_path)
            if old.value is None or not base_dense or new_dense == base_dense:
                continue
            sparse = min(2 * new_dense, max(new_dense, round(old.value * new_dense / base_dense)))
            self.put(path, sparse, f"R: {self.base_name}'s sparse over dense ratio", ASSUMED)

    def _warp_mma(self, hmma: float, sub: int, peak_per_core_clock: float) -> None:
        """warp_mma_flops_per_clock: the engine issues an m16n8k16 (4096 FLOP) every ceil(4096 / rate) clocks, so
        the rate is the one whose interval is the measured one."""
        interval = max(1, round(4096 * sub / hmma))
        rate = math.ceil(4096 / interval)
        self.put("pipelines.tensor.warp_mma_flops_per_clock", rate,
                 f"{self._where('hmma_throughput')}: mma.sync m16n8k16 {hmma:.0f} FLOP/clk/SM = one per {interval} "
                 f"clk per sub-partition")
        if rate >= peak_per_core_clock:
            self.drop("pipelines.tensor.warp_mma_flops_per_clock")

    def _memory(self) -> None:
        r, put = self.results, self.put
        for level, field, kernel in (("l1", "memory.l1.hit_latency", "chase<true>"),
                                     ("l2", "memory.l2.hit_latency", "chase<false>"),
                                     ("dram", "memory.dram.latency", "chase<false>")):
            hop = r.mean("pointer_chase", level, "cycles_per_hop")
            if hop is not None:
                footprint = r.first("pointer_chase", level, "footprint_bytes")
                size = f"{footprint >> 20} MiB" if isinstance(footprint, int) and footprint >= 2**20 else \
                    f"{(footprint or 0) >> 10} KiB"
                put(field, max(1, round(hop)), f"{self._where(kernel)}: {hop:.2f} cycles per hop over {size}"
                                               + (" (cold: TLB misses included)" if level == "dram" else ""))
        shared = r.mean("smem_latency_cycles")
        if shared is not None:
            put("memory.l1.shared_latency", max(1, round(shared)),
                f"{self._where('smem_latency')}: {shared:.2f} cycles per dependent LDS")
        l2 = r.first("l2_bytes")
        if isinstance(l2, int) and l2 > 0:
            put("memory.l2.size_bytes", l2, f"{self._where('cudaGetDeviceProperties')}: l2CacheSize")
        chip = r.mean("l2_bytes_per_clock")
        if chip:
            put("memory.l2.bandwidth_bytes_per_clock", max(1, round(chip)),
                f"{self._where('load_bandwidth<false>')}: {chip:.0f} B/clk, .cg loads from every SM over 16 MiB")
        one = r.mean("l2_bytes_per_clock_one_sm")
        if one:
            put("memory.l2.sm_bytes_per_clock", max(1, round(one)),
                f"{self._where('load_bandwidth<false>')}: {one:.1f} B/clk, .cg loads from one SM over 8 MiB")
        atomic = r.mean("atomic_same_address_cycles_per_update")
        if atomic:
            put("memory.l2.atomic_cycles_per_address_update", max(1, round(atomic)),
                f"{self._where('atomic_rate')}: {atomic:.2f} cycles per update of one address from every SM")
        total = r.first("global_memory_bytes")
        if isinstance(total, int) and total > 0:
            put("memory.dram.capacity_gb", round(total / 1e9, 1),
                f"{self._where('cudaGetDeviceProperties')}: totalGlobalMem {total:,} bytes")
        self._dram()

    def _dram(self) -> None:
        r, put = self.results, self.put
        mem, bus = r.mean("memory_clock_mhz"), r.mean("memory_bus_width_bits")
        read, copy, write = r.mean("stream_read_gbs"), r.mean("stream_copy_gbs"), r.mean("stream_write_gbs")
        peak = self.get("memory.dram.bandwidth_gbs")
        if mem and bus:
            peak = round(2 * mem * 1e6 * bus / 8 / 1e9, 1)
            put("memory.dram.bandwidth_gbs", peak,
                f"D: 2 x {mem:.0f} MHz x {bus:.0f} bits / 8 (double data rate), "
                f"{self._where('cudaDevAttrMemoryClockRate')}", DERIVED)
        elif not self.same_product and (sheet := _datasheet_peak(r.device, self.base_file)) is not None:
            peak, name, comment = sheet
            self.put("memory.dram.bandwidth_gbs", peak,
                     f"R: the peak is not measured (the results hold no bus width): arch/{name}.yaml's for the same "
                     f"product ({plain(comment)})", ASSUMED)
        elif read and read > peak:  # the base's peak is below what this part reads: keep its efficiency instead
            efficiency = self.get("memory.dram.read_efficiency")
            peak = round(read / efficiency, 1)
            self.put("memory.dram.bandwidth_gbs", peak,
                     f"R: the measured read bandwidth over {self.base_name}'s read efficiency ({efficiency}): the "
                     f"peak is not measured (its bus width is not in the results)", ASSUMED)
        if read:
            eff_read = min(1.0, read / peak)
            put("memory.dram.read_efficiency", round(eff_read, 4),
                f"{self._where('read_kernel')}: {read:.0f} GB/s read over 1 GiB = {eff_read:.1%} of {peak:g}")
        else:
            eff_read = self.get("memory.dram.read_efficiency")
        if copy and eff_read:
            eff_copy = copy / peak
            inverse = 2 / eff_copy - 1 / eff_read
            if inverse > 0:
                put("memory.dram.write_efficiency", round(min(1.0, 1 / inverse), 4),
                    f"D: copy efficiency = 2 / (1/read + 1/write), {self._where('copy_kernel')}: {copy:.0f} GB/s "
                    f"({eff_copy:.1%} of {peak:g})", DERIVED)
        elif write:
            put("memory.dram.write_efficiency", round(min(1.0, write / peak), 4),
                f"{self._where('write_kernel')}: {write:.0f} GB/s written over 1 GiB")


def _datasheet_peak(device: str, base_file: Path):
    """(DRAM peak GB/s, arch name, its comment) of a shipped arch file describing the same product as `device`
    (not the base file), or None: the peak the measured efficiencies are fractions of."""
    model = model_of(device)
    if model is None:
        return None
    for name in known_archs():
        path = arch_dir() / f"{name}.yaml"
        if path.resolve() == base_file.resolve():
            continue
        try:
            data = read_yaml(path, ArchError)
        except GpusimError:
            continue
        if isinstance(data, dict) and model_of(str(data.get("full_name", ""))) == model:
            notes = {f: c for f, c, _a in field_notes(path)}
            peak = _base_value(data, "memory.dram.bandwidth_gbs")
            if isinstance(peak, (int, float)) and not isinstance(peak, bool):
                return peak, name, notes.get("memory.dram.bandwidth_gbs", "")
    return None


def _base_value(data, path: str):
    value = data
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _num(value: float):
    """An integer where the value is whole (1980.0 -> 1980), else the float rounded to 4 decimals."""
    value = float(value)
    return int(value) if value.is_integer() else round(value, 4)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _nearest_power_of_two(x: float) -> int:
    return 1 << max(0, round(math.log2(max(x, 1.0))))
