"""Transformer inference on a modelled GPU: `estimate(model, arch, batch=, prompt=, generate=, tp=, kv_dtype=)` ->
LlmEstimate.

One layer's kernels (gpusim.llm.layers) are simulated cycle by cycle, each once per distinct shape
(gpusim.app.kernel_result, kept in the on-disk kernel cache), each on the whole GPU, one after another as a
stream runs them; a layer's time is their sum and the model's that times its layer count. With tensor
parallelism every layer adds two all-reduces of its rows x hidden activations (after the output projection and
after the down projection), run as an Application of AllReduceCommands on `tp` GPUs (gpusim.app.run_app: the
ring's time from the arch's interconnect figures).

* time to first token: the prefill of batch x prompt tokens through every layer (and its all-reduces), then the
  final RMSNorm and the LM head of each sequence's last token.
* time per output token: one decode step of `batch` tokens through every layer (and its all-reduces) and the LM
  head, its attention over the generation's mean context (prompt + generate / 2: decode attention's cost is
  linear in the context, so the midpoint gives the mean step).
* tokens per second: batch / time per output token.

Not modelled: kernel launch gaps and their overlap (each kernel starts when the previous one ends), the embedding
lookup, rotary embeddings and the KV-cache writes (fused into neighbouring kernels by the usual frameworks), the
MoE router's GEMM and the sampling of the next token.
"""

from __future__ import annotations

import attrs

from ..app import AllReduceCommand, Application, KernelCache, kernel_result, run_app
from ..app.format import shipped_root
from ..app.kernels import kernel_key
from ..arch import load_arch
from ..errors import GpusimError
from ..options import RunOptions
from .layers import LayerKernel, decode_kernels, prefill_kernels
from .memory import (MemoryPlan, WeightBytes, active_parameter_count, check_tp, kv_cache_bytes, kv_dtype_bytes,
                     memory_plan, parameter_count, weight_bytes)
from .model import ModelConfig, load_model

MAX_TOKENS = 1 << 22  # batch x (prompt + generate) above this is a typing error, not a run
USE_DEFAULT_CACHE = "default"


@attrs.frozen
class KernelTime:
    """One kernel of the estimate and what its simulation gave."""
    kernel: LayerKernel
    seconds: float  # one run's time, `kernel.scale` applied
    cycles: int
    bound: str  # the busiest unit, "latency" when none is 60% busy
    bound_pct: float
    dram_bytes: int
    sms: int
    warnings: tuple = ()

    @property
    def total_seconds(self) -> float:
        """Per layer (per step for the head): one run's time x its count."""
        return self.seconds * self.kernel.count

    def to_dict(self) -> dict:
        k = self.kernel
        return {"phase": k.phase, "name": k.role, "workload": k.workload, "params": k.params, "shape": k.shape,
                "count": k.count, "per": "layer" if k.per_layer else "step", "seconds": self.seconds,
                "seconds_total": self.total_seconds, "cycles": self.cycles, "bound": self.bound,
                "bound_pct": self.bound_pct, "flop": k.flop, "dram_bytes": self.dram_bytes, "scale": k.scale,
                "notes": list(k.notes)}


@attrs.frozen
class LlmEstimate:
    """Inference of `model` on `tp` GPUs of `arch`: latencies, memory and every kernel behind them."""
    model: ModelConfig
    arch: str
    batch: int
    prompt: int
    generate: int
    tp: int
    kv_dtype: str
    context: int  # the decode step's context (the generation's mean)
    weights: WeightBytes  # the whole model's
    kv_cache_bytes: int  # the whole cache at the end of generation
    memory: MemoryPlan  # one GPU's
    prefill: tuple  # KernelTime
    decode: tuple
    prefill_allreduce_s: float  # every layer's all-reduces of the prefill
    decode_allreduce_s: float  # every layer's all-reduces of one decode step
    dram_bandwidth_bytes_s: float  # the part's peak
    tensor_flops: float  # the part's dense FP16 tensor peak, FLOP/s
    warnings: tuple = ()
    simulated: int = 0  # kernels simulated by this estimate (the others came from the cache)

    def _phase_seconds(self, kernels) -> float:
        layers = sum(k.total_seconds for k in kernels if k.kernel.per_layer)
        head = sum(k.total_seconds for k in kernels if not k.kernel.per_layer)
        return self.model.layers * layers + head

    @property
    def time_to_first_token_s(self) -> float:
        return self._phase_seconds(self.prefill) + self.prefill_allreduce_s

    @property
    def time_per_output_token_s(self) -> float:
        return self._phase_seconds(self.decode) + self.decode_allreduce_s

    @property
    def tokens_per_s(self) -> float:
        return self.batch / self.time_per_output_token_s

    @property
    def decode_floor_s(self) -> float:
        """One GPU's weights and the step's KV-cache reads at the peak DRAM bandwidth: no decode step is faster."""
        kv_read = kv_cache_bytes(self.model, self.batch, self.context, self.kv_dtype, self.tp)
        return (self.memory.weight_bytes + kv_read) / self.dram_bandwidth_bytes_s

    @property
    def prefill_weight_flop(self) -> float:
        """2 x the parameters a token uses x batch x prompt: the prefill's weight math on all GPUs."""
        return 2.0 * active_parameter_count(self.model) * self.batch * self.prompt

    @property
    def prefill_weight_flops(self) -> float:
        """The prefill's weight math over the time to first token, all GPUs together (FLOP/s)."""
        return self.prefill_weight_flop / self.time_to_first_token_s

    def to_dict(self) -> dict:
        return {"model": self.model.to_dict(), "arch": self.arch, "batch": self.batch, "prompt": self.prompt,
                "generate": self.generate, "tp": self.tp, "kv_dtype": self.kv_dtype, "context": self.context,
                "time_to_first_token_s": self.time_to_first_token_s,
                "time_per_output_token_s": self.time_per_output_token_s, "tokens_per_s": self.tokens_per_s,
                "parameters": parameter_count(self.model), "active_parameters": active_parameter_count(self.model),
                "weight_bytes": self.weights.total, "weight_bytes_per_gpu": self.memory.weight_bytes,
                "weights": self.weights.to_dict(), "kv_cache_bytes": self.kv_cache_bytes,
                "fits_in_memory": self.memory.fits, "max_batch": self.memory.max_batch,
                "memory_per_gpu": self.memory.to_dict(),
                "allreduce_s": self.decode_allreduce_s, "prefill_allreduce_s": self.prefill_allreduce_s,
                "decode_floor_s": self.decode_floor_s, "prefill_weight_flops": self.prefill_weight_flops,
                "peak_dram_bytes_per_s": self.dram_bandwidth_bytes_s, "peak_tensor_flops": self.tensor_flops,
                "kernels": [k.to_dict() for k in (*self.prefill, *self.decode)],
                "warnings": list(self.warnings), "simulated": self.simulated}


def _whole(name: str, value, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or value > MAX_TOKENS:
        raise GpusimError(f"--{name} {value!r}: expected a whole number from {low} to {MAX_TOKENS:,}")
    return value


class _Simulator:
    """Kernel results for one estimate: each distinct (workload, parameters) simulated or read from the cache once."""

    def __init__(self, spec, options: RunOptions, cache: KernelCache | None, on_simulate=None):
        self.spec, self.options, self.cache, self.on_simulate = spec, options, cache, on_simulate
        self.memo: dict = {}
        self.simulated = 0

    def time(self, kernel: LayerKernel) -> KernelTime:
        key = (kernel.workload, tuple(sorted(kernel.params.items())))
        if key not in self.memo:
            path, params = shipped_root() / kernel.workload, dict(kernel.params)
            cached = self.cache is not None and self.cache.file(kernel_key(path, params, self.spec,
                                                                           self.options)).is_file()
            if not cached:
                self.simulated += 1
                if self.on_simulate is not None:
                    self.on_simulate(kernel)
            self.memo[key] = kernel_result(path, params, self.spec, self.options, self.cache)
        r = self.memo[key]
        return KernelTime(kernel, r.seconds * kernel.scale, r.cycles, r.bound, r.bound_pct, r.dram_bytes, r.sms,
                          tuple(r.warnings))


def allreduce_seconds(model: ModelConfig, spec, rows: int, tp: int) -> float:
    """Every layer's two all-reduces of rows x hidden activations, as an application on `tp` GPUs (0 at tp 1)."""
    if tp == 1:
        return 0.0
    nbytes = rows * model.hidden * model.dtype_bytes
    commands = [AllReduceCommand(bytes=nbytes, name=f"layer {i // 2} {'attention' if i % 2 == 0 else 'mlp'}")
                for i in range(2 * model.layers)]
    result = run_app(Application(f"{model.name} all-reduces", commands, gpus=tp), spec, gpus=tp, cache=None)
    return result.time_s


def estimate(model: str | ModelConfig, arch, *, batch: int = 1, prompt: int = 512, generate: int = 128, tp: int = 1,
             kv_dtype: str | None = None, options: RunOptions | None = None, cache=USE_DEFAULT_CACHE,
             on_simulate=None) -> LlmEstimate:
    """Estimate inference of `model` (a name, a file or a ModelConfig) on `tp` GPUs of `arch` for `batch` sequences
    of `prompt` tokens generating `generate` each. `kv_dtype`: fp16, bf16 or fp8 (None: the model's dtype).
    `options`: the kernels' run options (None: the defaults, sampling `auto`). `cache`: a KernelCache, "default"
    (the one at $GPUSIM_CACHE or ~/.cache/gpusim/kernels) or None (nothing read or kept). `on_simulate(LayerKernel)`
    hears each kernel the cache does not hold before it is simulated."""
    model = load_model(model)
    spec = load_arch(arch)
    batch, prompt = _whole("batch", batch, 1), _whole("prompt", prompt, 1)
    generate = _whole("generate", generate, 1)
    if batch * (prompt + generate) > MAX_TOKENS:
        raise GpusimError(f"--batch {batch} x (--prompt {prompt} + --generate {generate}): more than "
                          f"{MAX_TOKENS:,} tokens")
    tp = check_tp(model, tp)
    kv_dtype_bytes(model, kv_dtype)
    kv_name = kv_dtype or model.dtype
    options = options if options is not None else RunOptions()
    if cache == USE_DEFAULT_CACHE:
        cache = KernelCache()
    sim = _Simulator(spec, options, cache, on_simulate)
    context = prompt + generate // 2
    prefill = tuple(sim.time(k) for k in prefill_kernels(model, spec, batch, prompt, tp))
    decode = tuple(sim.time(k) for k in decode_kernels(model, spec, batch, context, tp, kv_dtype))
    warnings = [f"{k.kernel.phase} {k.kernel.role}: {w}" for k in (*prefill, *decode) for w in k.warnings]
    if model.dtype_bytes != 2:
        warnings.append(f"{model.name}'s weights are {model.dtype}: the kernels are simulated with 2-byte (FP16) "
                        f"weights, the memory counted at {model.dtype_bytes} bytes an element")
    if cache is not None:
        warnings += cache.problems
    result = LlmEstimate(
        model=model, arch=spec.name, batch=batch, prompt=prompt, generate=generate, tp=tp, kv_dtype=kv_name,
        context=context, weights=weight_bytes(model), kv_cache_bytes=kv_cache_bytes(model, batch, prompt + generate,
                                                                                   kv_dtype),
        memory=memory_plan(model, spec, batch, prompt, generate, tp, kv_dtype), prefill=prefill, decode=decode,
        prefill_allreduce_s=allreduce_seconds(model, spec, batch * prompt, tp),
        decode_allreduce_s=allreduce_seconds(model, spec, batch, tp),
        dram_bandwidth_bytes_s=spec.memory.dram.bandwidth_gbs * 1e9,
        tensor_flops=spec.peak_fp16_tensor_tflops * 1e12, warnings=tuple(warnings), simulated=sim.simulated)
    if result.time_per_output_token_s < result.decode_floor_s:
        warnings.append(f"physical limit: a decode step of {result.time_per_output_token_s * 1e3:.3f} ms reads "
                        f"{result.memory.weight_bytes:,} bytes of weights faster than the peak DRAM bandwidth allows "
                        f"({result.decode_floor_s * 1e3:.3f} ms)")
        result = attrs.evolve(result, warnings=tuple(warnings))
    return result


__all__ = ["KernelTime", "LlmEstimate", "allreduce_seconds", "estimate"]
