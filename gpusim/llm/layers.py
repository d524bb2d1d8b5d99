"""The kernels of one transformer layer (and of the LM head), as shipped workloads at the model's shapes: pure
functions of the model, the architecture and the run's sizes, nothing simulated here.

Per layer, in order: the input RMSNorm (fused with the previous residual add: workloads/rmsnorm.yaml), the QKV
projection, attention, the output projection, (with tp > 1 an all-reduce), the post-attention RMSNorm, the MLP's
gate and up projections as one GEMM of width 2 x ffn, the SwiGLU activation (workloads/swiglu.yaml), the down
projection (and an all-reduce). After the last layer: the final RMSNorm and the LM head, for the last token of each
sequence. With tensor parallelism over tp GPUs each GPU runs the same kernels at 1/tp of the heads, of the MLP's
width and of the vocabulary.

* Projections with more than GEMV_MAX_ROWS rows (prefill's batch x prompt tokens) run as the part's tile GEMM:
  workloads/gemm_hopper_ws.yaml on compute capability 9.x (wgmma, TMA), gemm_blackwell_umma.yaml on 10.x
  (tcgen05), gemm_tile128.yaml on 8.x (cp.async, mma.sync), gemm_tile128_sync.yaml before; M, N and K are rounded
  up to the workload's tile (the kernel's notes say so). Fewer rows (a decode step's batch, the LM head) run as
  workloads/gemv.yaml, which reads the weights once at DRAM bandwidth.
* Prefill attention: workloads/flash_attention3.yaml on 9.x, flash_attention.yaml (FlashAttention-2 with the
  library's tiles for the head dimension and part) on 8.x and 10.x (FlashAttention-3 needs wgmma, which Blackwell
  lacks), flash_attention_simple.yaml before 8.0 (no cp.async), over batch x heads / tp at seq = prompt (rounded up
  to the query and key tiles). The workloads compute every query against every key; a causal prefill visits
  (n + 1) / 2n of the key tiles (n query tiles), so the simulated time is scaled by that fraction (`scale`).
* Decode attention: workloads/kv_decode.yaml (split-KV FlashDecoding) over the context given (the estimate passes
  the mean context of the generation), rounded up to whole splits. An FP8 cache is simulated as an FP16 cache of
  half the context: the same bytes, which is what bounds it.
* A mixture of experts: in prefill each expert's projections take batch x prompt x experts_per_token / experts
  rows (the router's mean share) and run once per expert; in decode the experts a step touches
  (experts x (1 - (1 - k / experts)^batch), rounded up) run as one grouped GEMV over their rows. The router's own
  small GEMM is not simulated.
* An LM head of more than LM_HEAD_SLICE_BYTES of weights a GPU runs as equal slices of its vocabulary, one
  simulated and counted as many times (a slice adds only its start and end, about a microsecond).
"""

from __future__ import annotations

import math

import attrs

from ..errors import GpusimError
from .memory import kv_dtype_bytes, kv_heads_per_gpu
from .model import ModelConfig

GEMV_MAX_ROWS = 64  # projections of at most this many rows run as gemv.yaml (its batch groups hold 64)
GEMV_LOADS_IN_FLIGHT = 16  # weight loads a lane keeps in flight (U x ROWS), 8 past two batch groups (registers)
# An LM head of more weight bytes than this a GPU runs as equal slices of its vocabulary, one simulated and counted
# as many times: simulating a GEMV costs minutes per GB of weights, and a slice adds only its ramp (about 1 us).
LM_HEAD_SLICE_BYTES = 256 * 2**20
HEAD_DIMS = (64, 128, 256)  # what the attention workloads take


@attrs.frozen
class LayerKernel:
    """One kernel of a layer (or of the LM head): its workload and parameters, how many run and what it computes."""
    phase: str  # "prefill" or "decode"
    role: str  # "input_norm", "qkv", "attention", "o_proj", "post_attention_norm", "gate_up", "swiglu", "down",
    # "final_norm", "lm_head"
    workload: str  # under the shipped root: "workloads/gemv.yaml"
    params: dict
    shape: str  # what it computes, as the tables show it ("M=512 N=6144 K=4096")
    flop: float  # the useful FLOP of one run (the rounding's padding not counted)
    count: int = 1  # runs per layer (per step for the head): an MoE layer's experts, the LM head's slices
    per_layer: bool = True  # False: once per step (the final norm and the LM head)
    scale: float = 1.0  # what the simulated time is multiplied by (the causal fraction of prefill attention)
    notes: tuple = attrs.field(default=(), converter=tuple)  # the roundings, one line each

    def to_dict(self) -> dict:
        return attrs.asdict(self)


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def compute_major(spec) -> int:
    """The compute capability's major number: 8 for "8.6", 10 for "10.0"."""
    return int(str(spec.compute_capability).split(".")[0])


def gemm_workload(spec) -> tuple[str, int, int, int]:
    """The tile GEMM for this part: (workload, M multiple, N multiple, K multiple)."""
    major = compute_major(spec)
    if major == 9:
        return "workloads/gemm_hopper_ws.yaml", 256, 256, 64  # 128 x 256 tiles in clusters of two along M
    if major >= 10:
        return "workloads/gemm_blackwell_umma.yaml", 128, 256, 64
    if major == 8:
        return "workloads/gemm_tile128.yaml", 128, 128, 32
    return "workloads/gemm_tile128_sync.yaml", 128, 128, 32


def _rounding(names_values: list[tuple[str, int, int]], why: str) -> tuple:
    changed = [f"{name} {given} -> {used}" for name, given, used in names_values if given != used]
    return (f"{', '.join(changed)} ({why})",) if changed else ()


def gemm_kernel(spec, phase: str, role: str, m: int, n: int, k: int, count: int = 1, per_layer: bool = True,
                ) -> LayerKernel:
    """A projection of m rows, n output and k input features: the tile GEMM, or the GEMV for few rows."""
    if m <= GEMV_MAX_ROWS:
        return gemv_kernel(spec, phase, role, m, n, k, count, per_layer)
    workload, m_mult, n_mult, k_mult = gemm_workload(spec)
    mm, nn, kk = round_up(m, m_mult), round_up(n, n_mult), round_up(k, k_mult)
    notes = _rounding([("M", m, mm), ("N", n, nn), ("K", k, kk)], f"{workload.split('/')[-1]}'s tile multiples")
    return LayerKernel(phase, role, workload, {"M": mm, "N": nn, "K": kk}, f"M={m} N={n} K={k}", 2.0 * m * n * k,
                       count, per_layer, notes=notes)


def gemv_params(n: int, k: int, rows: int, sms: int) -> tuple[dict, tuple]:
    """gemv.yaml's parameters for rows x k times k x n on `sms` SMs, and its roundings: 16-row tiles, two of them a
    block where the grid still has four blocks an SM, 4 warps splitting K (2 past two batch groups, whose partial
    sums the block adds at the end; fewer where K is short), U x ROWS weight loads in flight a lane, and a split of
    K over blocks (KS) where the row tiles alone leave SMs idle."""
    groups = -(-rows // 8)
    in_flight = GEMV_LOADS_IN_FLIGHT if groups <= 2 else GEMV_LOADS_IN_FLIGHT // 2
    row_tiles = -(-n // 16)
    tiles_per_block = 2 if row_tiles >= 8 * sms else 1
    nn = round_up(n, 16 * tiles_per_block)
    blocks = nn // (16 * tiles_per_block)
    k_tiles = -(-k // 16)
    for warps in ((4, 2, 1) if groups <= 2 else (2, 1)):
        u = in_flight // tiles_per_block
        while u >= 2 and k_tiles % (warps * u):
            u //= 2
        if u >= 2 and k_tiles % (warps * u) == 0:
            break
    else:
        warps, u = 1, 2
    splits = 1
    while blocks * splits < sms and k_tiles % (2 * splits * warps * u) == 0:
        splits *= 2
    kk = round_up(k, 16 * splits * warps * u)
    notes = _rounding([("N", n, nn), ("K", k, kk)], "gemv.yaml's 16-row tiles and K slices")
    return {"N": nn, "K": kk, "B": rows, "ROWS": tiles_per_block, "WK": warps, "U": u, "KS": splits}, notes


def gemv_kernel(spec, phase: str, role: str, m: int, n: int, k: int, count: int = 1,
                per_layer: bool = True) -> LayerKernel:
    params, notes = gemv_params(n, k, m, spec.sms)
    return LayerKernel(phase, role, "workloads/gemv.yaml", params, f"M={m} N={n} K={k}", 2.0 * m * n * k, count,
                       per_layer, notes=notes)


def _check_head_dim(model: ModelConfig) -> None:
    if model.head_dim not in HEAD_DIMS:
        raise GpusimError(f"{model.name}: head_dim {model.head_dim}: the attention workloads take "
                          f"{', '.join(map(str, HEAD_DIMS))}")


def flash_attention2_tiles(spec, head_dim: int) -> dict[str, int]:
    """The FlashAttention-2 library's forward tiles for a head dimension on a part (run_mha_fwd_hdim64/128/256):
    query rows per block BM, keys per tile BN, warps per block."""
    if head_dim == 64:
        return {"BM": 128, "BN": 128, "WARPS": 4}
    if head_dim == 128:
        ampere_consumer = str(spec.compute_capability) in ("8.6", "8.7", "8.9")
        return {"BM": 128, "BN": 32 if ampere_consumer else 64, "WARPS": 4}
    smem = spec.shared_memory
    if smem.per_block_optin_bytes >= 2 * head_dim * (128 + 2 * 64) and smem.per_sm_bytes < 4 * head_dim * (64 + 2 * 64):
        return {"BM": 128, "BN": 64, "WARPS": 8}
    return {"BM": 64, "BN": 64, "WARPS": 4}


def prefill_attention(model: ModelConfig, spec, batch: int, prompt: int, tp: int) -> LayerKernel:
    """FlashAttention over batch x heads / tp at seq = prompt, scaled to the causal share of its key tiles."""
    _check_head_dim(model)
    heads = model.heads // tp
    if compute_major(spec) == 9:
        workload, tile = "workloads/flash_attention3.yaml", 128
        params = {"batch": batch, "heads": heads, "seq": round_up(prompt, tile), "d": model.head_dim}
        if model.head_dim == 256:
            params["BN"] = 64
    elif compute_major(spec) >= 8:
        workload = "workloads/flash_attention.yaml"
        shape = flash_attention2_tiles(spec, model.head_dim)
        tile = shape["BM"]  # a multiple of BN in every shape the library takes
        params = {"batch": batch, "heads": heads, "seq": round_up(prompt, tile), "d": model.head_dim, **shape}
    else:
        workload, tile = "workloads/flash_attention_simple.yaml", 64
        params = {"batch": batch, "heads": heads, "seq": round_up(prompt, tile), "d": model.head_dim}
    tiles = params["seq"] // tile
    causal = (tiles + 1) / (2 * tiles)
    notes = _rounding([("seq", prompt, params["seq"])], f"{workload.split('/')[-1]}'s {tile}-row query tiles")
    notes += (f"every query against every key simulated; time x {causal:.4f}, the causal share of key tiles",)
    flop = 4.0 * batch * heads * prompt * prompt * model.head_dim * (prompt + 1) / (2 * prompt)
    return LayerKernel("prefill", "attention", workload, params,
                       f"batch={batch} heads={heads} seq={prompt} d={model.head_dim} causal", flop, scale=causal,
                       notes=notes)


def _kv_splits(keys: int, heads: int, sms: int, unroll: int, head_dim: int) -> tuple[int, int, int]:
    """kv_decode.yaml's splits (blocks per K/V head: four an SM in all where the context allows), loop trips and
    keys a block covers per trip (four warps, `unroll` 512-byte loads each)."""
    keys_per_trip = 4 * unroll * 256 // head_dim
    splits = max(1, min(-(-4 * sms // heads), -(-keys // keys_per_trip)))
    trips = -(-keys // (splits * keys_per_trip))
    return -(-keys // (trips * keys_per_trip)), trips, keys_per_trip


def decode_attention(model: ModelConfig, spec, batch: int, context: int, tp: int,
                     kv_dtype: str | None = None) -> LayerKernel:
    """Split-KV decode attention of one new token per sequence over `context` cached tokens."""
    _check_head_dim(model)
    heads_q, heads_kv = model.heads // tp, kv_heads_per_gpu(model, tp)
    heads_q = max(heads_q, heads_kv)
    fp8 = kv_dtype_bytes(model, kv_dtype) == 1
    keys = -(-context // 2) if fp8 else context
    for unroll in (4, 2, 1):  # the most loads in flight whose whole trips overshoot the context by 5% at most
        splits, trips, keys_per_trip = _kv_splits(keys, batch * heads_kv, spec.sms, unroll, model.head_dim)
        if splits * trips * keys_per_trip <= keys * 1.05:
            break
    seq = splits * trips * keys_per_trip
    params = {"batch": batch, "heads_q": heads_q, "heads_kv": heads_kv, "d": model.head_dim, "seq": seq,
              "splits": splits, "unroll": unroll}
    notes = ("an FP8 cache simulated as an FP16 cache of half the context (the same bytes)",) if fp8 else ()
    notes += _rounding([("context", keys, seq)], f"kv_decode.yaml's {splits} splits of whole {keys_per_trip}-key trips")
    flop = 4.0 * batch * heads_q * context * model.head_dim
    return LayerKernel("decode", "attention", "workloads/kv_decode.yaml", params,
                       f"batch={batch} heads={heads_q}/{heads_kv} context={context} d={model.head_dim}", flop,
                       notes=notes)


def rmsnorm_kernel(phase: str, role: str, rows: int, hidden: int, per_layer: bool = True) -> LayerKernel:
    """The fused residual add and RMSNorm over `rows` rows of `hidden`."""
    chunks = hidden // 8
    threads = next((t for t in (256, 128, 64, 32) if hidden % 8 == 0 and chunks % t == 0), None)
    if threads is None:
        raise GpusimError(f"hidden {hidden}: rmsnorm.yaml takes a multiple of 256")
    return LayerKernel(phase, role, "workloads/rmsnorm.yaml", {"T": rows, "H": hidden, "threads": threads},
                       f"rows={rows} width={hidden}", 4.0 * rows * hidden, per_layer=per_layer)


def swiglu_kernel(spec, phase: str, tokens: int, width: int) -> LayerKernel:
    """silu(gate) x up over tokens x width elements, grid-stride over at most 8 blocks an SM."""
    n = tokens * width
    threads = 256
    blocks = max(1, min(8 * spec.sms, -(-n // (8 * threads))))
    return LayerKernel(phase, "swiglu", "workloads/swiglu.yaml", {"n": round_up(n, 8), "blocks": blocks,
                                                                  "threads": threads},
                       f"tokens={tokens} width={width}", 5.0 * n)


def active_experts(model: ModelConfig, batch: int) -> int:
    """Experts a decode step of `batch` tokens touches, the expected number rounded up (router picks taken as
    uniform): experts x (1 - (1 - k / experts)^batch)."""
    expected = model.experts * (1 - (1 - model.experts_per_token / model.experts) ** batch)
    return min(model.experts, math.ceil(expected - 1e-9))


def mlp_kernels(model: ModelConfig, spec, phase: str, tokens: int, tp: int) -> list[LayerKernel]:
    """Gate and up (one GEMM), SwiGLU, down: for a dense model at `tokens` rows; for an MoE, per expert."""
    width = model.ffn // tp
    if not model.is_moe:
        return [gemm_kernel(spec, phase, "gate_up", tokens, 2 * width, model.hidden),
                swiglu_kernel(spec, phase, tokens, width),
                gemm_kernel(spec, phase, "down", tokens, model.hidden, width)]
    routed = tokens * model.experts_per_token
    if phase == "prefill":
        rows = -(-routed // model.experts)
        return [gemm_kernel(spec, phase, "gate_up", rows, 2 * width, model.hidden, count=model.experts),
                swiglu_kernel(spec, phase, routed, width),
                gemm_kernel(spec, phase, "down", rows, model.hidden, width, count=model.experts)]
    touched = active_experts(model, tokens)
    rows = -(-routed // touched)
    gate_up = gemv_kernel(spec, phase, "gate_up", rows, touched * 2 * width, model.hidden)
    down = gemv_kernel(spec, phase, "down", rows, touched * model.hidden, width)
    note = (f"{touched} of {model.experts} experts touched, {rows} rows each, as one grouped GEMV",)
    return [attrs.evolve(gate_up, notes=note + gate_up.notes), swiglu_kernel(spec, phase, routed, width),
            attrs.evolve(down, notes=note + down.notes)]


def lm_head_kernel(model: ModelConfig, spec, phase: str, batch: int, tp: int) -> LayerKernel:
    """The LM head over the last token of each sequence (vocab / tp columns a GPU), in slices of at most
    LM_HEAD_SLICE_BYTES of weights."""
    rows = model.vocab // tp
    slices = max(1, -(-rows * model.hidden * model.dtype_bytes // LM_HEAD_SLICE_BYTES))
    head = gemm_kernel(spec, phase, "lm_head", batch, round_up(-(-rows // slices), 16), model.hidden,
                       count=slices, per_layer=False)
    if slices == 1:
        return head
    note = (f"N={rows} run as {slices} GEMVs of {head.params['N']} rows (one simulated, counted {slices} times)",)
    return attrs.evolve(head, shape=f"M={batch} N={rows} ({slices} x {head.params['N']}) K={model.hidden}",
                        flop=2.0 * batch * rows * model.hidden / slices, notes=note + head.notes)


def head_kernels(model: ModelConfig, spec, phase: str, batch: int, tp: int) -> list[LayerKernel]:
    """The final RMSNorm and the LM head over the last token of each sequence."""
    return [rmsnorm_kernel(phase, "final_norm", batch, model.hidden, per_layer=False),
            lm_head_kernel(model, spec, phase, batch, tp)]


def layer_kernels(model: ModelConfig, spec, phase: str, batch: int, tokens: int, tp: int,
                  attention: LayerKernel) -> list[LayerKernel]:
    """One layer's kernels at `tokens` rows (prefill: batch x prompt; decode: batch), in order."""
    qkv_width = model.q_width // tp + 2 * kv_heads_per_gpu(model, tp) * model.head_dim
    return [rmsnorm_kernel(phase, "input_norm", tokens, model.hidden),
            gemm_kernel(spec, phase, "qkv", tokens, qkv_width, model.hidden),
            attention,
            gemm_kernel(spec, phase, "o_proj", tokens, model.hidden, model.q_width // tp),
            rmsnorm_kernel(phase, "post_attention_norm", tokens, model.hidden),
            *mlp_kernels(model, spec, phase, tokens, tp)]


def prefill_kernels(model: ModelConfig, spec, batch: int, prompt: int, tp: int = 1) -> list[LayerKernel]:
    """A prefill's kernels: one layer's at batch x prompt rows, then the final norm and the LM head."""
    attention = prefill_attention(model, spec, batch, prompt, tp)
    return (layer_kernels(model, spec, "prefill", batch, batch * prompt, tp, attention)
            + head_kernels(model, spec, "prefill", batch, tp))


def decode_kernels(model: ModelConfig, spec, batch: int, context: int, tp: int = 1,
                   kv_dtype: str | None = None) -> list[LayerKernel]:
    """One decode step's kernels: one layer's at `batch` rows attending over `context` tokens, then the head."""
    attention = decode_attention(model, spec, batch, context, tp, kv_dtype)
    return (layer_kernels(model, spec, "decode", batch, batch, tp, attention)
            + head_kernels(model, spec, "decode", batch, tp))


__all__ = ["GEMV_MAX_ROWS", "HEAD_DIMS", "LayerKernel", "active_experts", "compute_major", "decode_attention",
           "decode_kernels", "gemm_kernel", "gemm_workload", "gemv_kernel", "gemv_params", "head_kernels",
           "layer_kernels", "lm_head_kernel", "mlp_kernels", "prefill_attention", "prefill_kernels", "rmsnorm_kernel",
           "swiglu_kernel"]
