"""Transformer inference estimates: `estimate(model, arch, batch=, prompt=, generate=, tp=, kv_dtype=)` ->
LlmEstimate (time to first token, time per output token, tokens per second, weights, KV cache, whether they fit).

`model` holds the model configurations (shipped YAML files, Hugging Face config.json), `memory` the exact byte
counts and the fit, `layers` one layer's kernels as shipped workloads at the model's shapes, `estimate` their
simulation (gpusim.app.kernel_result) and composition with the tensor-parallel all-reduces (gpusim.app.run_app),
`plots` the roofline and the time breakdown.
"""

from .estimate import KernelTime, LlmEstimate, estimate
from .layers import LayerKernel, decode_kernels, prefill_kernels
from .memory import (MemoryPlan, WeightBytes, activation_reserve_bytes, kv_cache_bytes, max_batch, memory_plan,
                     parameter_count, weight_bytes)
from .model import ModelConfig, ModelError, load_model, shipped_models

__all__ = ["KernelTime", "LayerKernel", "LlmEstimate", "MemoryPlan", "ModelConfig", "ModelError", "WeightBytes",
           "activation_reserve_bytes", "decode_kernels", "estimate", "kv_cache_bytes", "load_model", "max_batch",
           "memory_plan", "parameter_count", "prefill_kernels", "shipped_models", "weight_bytes"]
