"""What a model needs in device memory: its weights, its KV cache, a reserve for activations, and whether that fits
(pure functions, exact integers).

* Weights: the embedding (vocab x hidden); per layer the Q, K, V and O projections, the MLP's gate, up and down
  projections (every expert's, for a mixture of experts, and the router's hidden x experts), the two RMSNorm
  weights; the final RMSNorm; the LM head (vocab x hidden) unless tied to the embedding.
* KV cache: 2 (K and V) x layers x kv_heads x head_dim x bytes of the cache's dtype x tokens x batch, tokens being
  the prompt and every generated token (the cache's size at the end of generation).
* Tensor parallelism over `tp` GPUs splits the attention heads, the MLP's width and the vocabulary: each GPU holds
  1/tp of the Q, O, MLP, embedding and LM-head weights, ceil(kv_heads / tp) K/V heads of the K and V projections
  and of the cache (K/V heads are replicated where tp exceeds them), and every RMSNorm and router weight.
* Activation reserve, per GPU: what prefilling one layer keeps live at once, the largest activation of the
  forward pass: the residual stream and its normed copy (2 x T x hidden), the widest intermediate (T x the wider of
  the QKV output and the gate-and-up output, per GPU), at the model's dtype, T = batch x prompt tokens; and the
  last tokens' logits in FP32 (batch x vocab / tp x 4). A framework's own workspace (cuBLAS, NCCL buffers, CUDA
  graphs) comes on top and is not counted.
* Fits: weights + KV cache + reserve per GPU at most the arch's memory.dram.capacity_gb x 10^9 bytes.
"""

from __future__ import annotations

import math

import attrs

from ..errors import GpusimError
from .model import DTYPE_BYTES, ModelConfig

LOGIT_BYTES = 4  # the LM head's output is kept in FP32 for sampling


@attrs.frozen
class WeightBytes:
    """A model's weight bytes by part, on one GPU of `tp` (tp = 1: the whole model)."""
    embedding: int
    attention: int  # all layers' Q, K, V and O projections
    mlp: int  # all layers' gate, up and down projections (every expert's)
    router: int  # all layers' MoE routers (0 for a dense model)
    norms: int  # every RMSNorm weight, the final one included
    lm_head: int  # 0 when tied to the embedding
    tp: int = 1

    @property
    def total(self) -> int:
        return self.embedding + self.attention + self.mlp + self.router + self.norms + self.lm_head

    def to_dict(self) -> dict:
        return {**attrs.asdict(self), "total": self.total}


def kv_heads_per_gpu(model: ModelConfig, tp: int) -> int:
    """K/V heads each GPU holds: kv_heads / tp, or one (replicated) where tp exceeds them."""
    return max(1, math.ceil(model.kv_heads / tp))


def check_tp(model: ModelConfig, tp: int) -> int:
    """A tensor-parallel degree that divides the model's query heads, its MLP width and its vocabulary."""
    if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
        raise GpusimError(f"--tp {tp!r}: expected a whole number of GPUs, at least 1")
    for field, value in (("heads", model.heads), ("ffn", model.ffn)):
        if value % tp:
            raise GpusimError(f"--tp {tp}: {model.name}'s {field} ({value}) is not a multiple of it (tensor "
                              f"parallelism splits them evenly)")
    if model.kv_heads % tp and tp % model.kv_heads:
        raise GpusimError(f"--tp {tp}: {model.name}'s kv_heads ({model.kv_heads}) neither divide it nor are a "
                          f"multiple of it")
    return tp


def weight_bytes(model: ModelConfig, tp: int = 1) -> WeightBytes:
    """The weight bytes of one GPU of `tp` (the module's docstring says what each holds)."""
    h, b = model.hidden, model.dtype_bytes
    kv_width = kv_heads_per_gpu(model, tp) * model.head_dim
    per_layer_attention = h * model.q_width // tp * 2 + h * kv_width * 2  # Q and O split, K and V per held head
    per_layer_mlp = model.experts * 3 * h * model.ffn // tp
    router = model.layers * h * model.experts if model.is_moe else 0
    vocab_part = model.vocab * h // tp
    return WeightBytes(embedding=vocab_part * b, attention=model.layers * per_layer_attention * b,
                       mlp=model.layers * per_layer_mlp * b, router=router * b,
                       norms=(2 * model.layers + 1) * h * b, lm_head=0 if model.tie_embeddings else vocab_part * b,
                       tp=tp)


def parameter_count(model: ModelConfig) -> int:
    """The model's parameters (every expert's): its weight bytes on one GPU over its dtype's size."""
    return weight_bytes(model).total // model.dtype_bytes


def active_parameter_count(model: ModelConfig) -> int:
    """The parameters one token uses: every weight but the experts the router does not pick."""
    w = weight_bytes(model)
    unused = w.mlp * (model.experts - model.experts_per_token) // model.experts
    return (w.total - unused) // model.dtype_bytes


def kv_dtype_bytes(model: ModelConfig, kv_dtype: str | None) -> int:
    """Bytes per cached K or V element: the given dtype's (fp16, bf16, fp8), else the model's."""
    if kv_dtype is None:
        return model.dtype_bytes
    if kv_dtype not in ("fp16", "bf16", "fp8"):
        raise GpusimError(f"--kv-dtype {kv_dtype!r}: expected fp16, bf16 or fp8")
    return DTYPE_BYTES[kv_dtype]


def kv_cache_bytes(model: ModelConfig, batch: int, tokens: int, kv_dtype: str | None = None, tp: int = 1) -> int:
    """2 x layers x kv_heads x head_dim x bytes x tokens x batch: the cache of `batch` sequences of `tokens` each,
    on one GPU of `tp` (its ceil(kv_heads / tp) heads; tp = 1: the whole cache)."""
    heads = model.kv_heads if tp == 1 else kv_heads_per_gpu(model, tp)
    return 2 * model.layers * heads * model.head_dim * kv_dtype_bytes(model, kv_dtype) * tokens * batch


def activation_reserve_bytes(model: ModelConfig, batch: int, prompt: int, tp: int = 1) -> int:
    """The activation reserve of one GPU of `tp` (the module's docstring): the residual stream, its normed copy and
    the widest intermediate of prefilling batch x prompt tokens, and the last tokens' FP32 logits."""
    tokens = batch * prompt
    qkv = (model.q_width // tp + 2 * kv_heads_per_gpu(model, tp) * model.head_dim)
    gate_up = 2 * model.ffn * model.experts_per_token // tp
    activations = tokens * (2 * model.hidden + max(qkv, gate_up)) * model.dtype_bytes
    return activations + batch * (model.vocab // tp) * LOGIT_BYTES


@attrs.frozen
class MemoryPlan:
    """One GPU's memory under a run: what it holds, against its capacity."""
    capacity_bytes: int
    weight_bytes: int  # per GPU
    kv_cache_bytes: int  # per GPU, at the end of generation
    reserve_bytes: int  # per GPU, the activation reserve
    max_batch: int  # the largest batch whose weights, KV cache and reserve fit (0: the weights alone do not)

    @property
    def used_bytes(self) -> int:
        return self.weight_bytes + self.kv_cache_bytes + self.reserve_bytes

    @property
    def fits(self) -> bool:
        return self.used_bytes <= self.capacity_bytes

    def to_dict(self) -> dict:
        return {**attrs.asdict(self), "used_bytes": self.used_bytes, "fits": self.fits}


def capacity_bytes(spec) -> int:
    """A part's device memory in bytes: memory.dram.capacity_gb x 10^9."""
    return round(spec.memory.dram.capacity_gb * 1e9)


def max_batch(model: ModelConfig, capacity: int, prompt: int, generate: int, tp: int = 1,
              kv_dtype: str | None = None) -> int:
    """The largest batch whose weights, KV cache and activation reserve fit one GPU of `capacity` bytes (both the
    cache and the reserve grow linearly with the batch); 0 when the weights alone leave no room for one sequence."""
    free = capacity - weight_bytes(model, tp).total
    per_sequence = (kv_cache_bytes(model, 1, prompt + generate, kv_dtype, tp)
                    + activation_reserve_bytes(model, 1, prompt, tp))
    return max(0, free // per_sequence)


def memory_plan(model: ModelConfig, spec, batch: int, prompt: int, generate: int, tp: int = 1,
                kv_dtype: str | None = None) -> MemoryPlan:
    """One GPU's memory for `batch` sequences of `prompt` + `generate` tokens on `spec`, over `tp` GPUs."""
    capacity = capacity_bytes(spec)
    return MemoryPlan(capacity_bytes=capacity, weight_bytes=weight_bytes(model, tp).total,
                      kv_cache_bytes=kv_cache_bytes(model, batch, prompt + generate, kv_dtype, tp),
                      reserve_bytes=activation_reserve_bytes(model, batch, prompt, tp),
                      max_batch=max_batch(model, capacity, prompt, generate, tp, kv_dtype))


__all__ = ["LOGIT_BYTES", "MemoryPlan", "WeightBytes", "activation_reserve_bytes", "active_parameter_count",
           "capacity_bytes", "check_tp", "kv_cache_bytes", "kv_dtype_bytes", "kv_heads_per_gpu", "max_batch",
           "memory_plan", "parameter_count", "weight_bytes"]
