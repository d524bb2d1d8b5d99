"""Transformer inference estimates (gpusim.llm, `gpusim llm`): weight and KV-cache bytes exactly as the formulas give
them, the fit in memory and the largest batch, model files and Hugging Face configs read with one-line errors, the
kernels of a layer at the model's shapes, and an end-to-end estimate that is no faster than DRAM allows and the same
every run."""

from __future__ import annotations

import json

import attrs
import pytest

from gpusim.app import KernelCache
from gpusim.arch import load_arch
from gpusim.errors import GpusimError
from gpusim.llm import (ModelConfig, ModelError, activation_reserve_bytes, estimate, kv_cache_bytes, load_model,
                        max_batch, memory_plan, parameter_count, weight_bytes)
from gpusim.llm.layers import GEMV_MAX_ROWS, active_experts, decode_kernels, gemv_params, prefill_kernels
from gpusim.llm.memory import active_parameter_count, capacity_bytes, check_tp
from gpusim.llm.model import HF_FIELDS

from tests.conftest import run_cli

H100 = load_arch("h100")
LLAMA_8B_CONFIG = {"_name_or_path": "meta-llama/Meta-Llama-3-8B", "architectures": ["LlamaForCausalLM"],
                   "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
                   "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
                   "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256}
TINY = ("name: tiny\nsource: a two-layer test model\nlayers: 2\nhidden: 512\nheads: 8\nkv_heads: 2\nhead_dim: 64\n"
        "ffn: 1024\nvocab: 2048\ndtype: fp16\n")


@pytest.fixture(scope="module")
def llama8b() -> ModelConfig:
    return load_model("llama-3-8b")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "tiny.yaml"
    path.write_text(TINY)
    return path


# ------------------------------------------------------------------------------------------------ bytes

@pytest.mark.fast
def test_kv_cache_bytes_are_the_formula(llama8b):
    """KV cache = 2 x layers x kv_heads x head_dim x bytes x tokens x batch, at the end of generation."""
    assert kv_cache_bytes(llama8b, batch=4, tokens=1024 + 128) == 2 * 32 * 8 * 128 * 2 * 1152 * 4
    assert kv_cache_bytes(llama8b, 4, 1152, kv_dtype="fp8") == 2 * 32 * 8 * 128 * 1 * 1152 * 4


@pytest.mark.fast
def test_llama_3_8b_weights_are_its_8_03_billion_parameters(llama8b):
    """The embedding, 32 layers of Q/K/V/O, gate/up/down and two norms, the final norm and the untied LM head:
    8,030,261,248 parameters (8.03e9 on the model card, within 1%), 16.06 GB in BF16."""
    assert parameter_count(llama8b) == 8_030_261_248
    total = weight_bytes(llama8b).total
    assert total == pytest.approx(8.03e9 * 2, rel=0.01)
    assert 15e9 < total < 17e9


@pytest.mark.fast
def test_70b_and_mixtral_parameters_match_their_cards():
    """Llama 3 70B: 70.55e9; Mixtral 8x7B: 46.7e9 stored, 12.9e9 used per token (two of eight experts)."""
    assert parameter_count(load_model("llama-3-70b")) == 70_553_706_496
    mixtral = load_model("mixtral-8x7b")
    assert parameter_count(mixtral) == 46_702_792_704
    assert active_parameter_count(mixtral) == 12_879_925_248


@pytest.mark.fast
def test_tied_embeddings_drop_the_lm_head(llama8b):
    tied = attrs.evolve(llama8b, tie_embeddings=True)
    assert weight_bytes(llama8b).total - weight_bytes(tied).total == 128256 * 4096 * 2


@pytest.mark.fast
def test_tensor_parallelism_splits_weights_and_replicates_scarce_kv_heads(llama8b):
    """Over tp GPUs each holds 1/tp of the Q, O, MLP and vocabulary weights; K/V heads are split while there are
    enough of them (8 over 8 GPUs: one each) and the norms are copied to every GPU."""
    model70 = load_model("llama-3-70b")
    whole, split = weight_bytes(model70), weight_bytes(model70, tp=8)
    assert split.mlp * 8 == whole.mlp and split.attention * 8 == whole.attention and split.norms == whole.norms
    assert kv_cache_bytes(model70, 1, 1000, tp=8) * 8 == kv_cache_bytes(model70, 1, 1000)
    # 16 GPUs for 8 K/V heads: each still holds a whole head of the cache
    assert kv_cache_bytes(model70, 1, 1000, tp=16) == kv_cache_bytes(model70, 1, 1000, tp=8)


@pytest.mark.fast
def test_70b_does_not_fit_one_h100_but_fits_eight(llama8b):
    """141 GB of BF16 weights exceed an H100's 80 GB; over eight GPUs each holds 17.6 GB and fits."""
    model70 = load_model("llama-3-70b")
    alone = memory_plan(model70, H100, batch=1, prompt=512, generate=128)
    assert not alone.fits and alone.max_batch == 0
    split = memory_plan(model70, H100, batch=1, prompt=512, generate=128, tp=8)
    assert split.fits and split.max_batch > 1
    assert memory_plan(llama8b, H100, 1, 512, 128).fits


@pytest.mark.fast
def test_max_batch_is_the_largest_batch_that_fits(llama8b):
    """At max_batch the weights, the cache and the activation reserve fit; one more sequence does not."""
    for prompt, generate, kv in ((8192, 8192, None), (2048, 512, "fp8"), (128, 128, None)):
        best = max_batch(llama8b, capacity_bytes(H100), prompt, generate, kv_dtype=kv)
        assert memory_plan(llama8b, H100, best, prompt, generate, kv_dtype=kv).fits
        assert not memory_plan(llama8b, H100, best + 1, prompt, generate, kv_dtype=kv).fits
    assert max_batch(llama8b, capacity_bytes(H100), 8192, 8192) < max_batch(llama8b, capacity_bytes(H100), 8192,
                                                                             8192, kv_dtype="fp8")


@pytest.mark.fast
def test_activation_reserve_is_the_widest_prefill_activation(llama8b):
    """2 x T x hidden (residual and normed copy) + T x 2 ffn (gate and up's output) at 2 bytes, T = batch x prompt,
    and the last tokens' FP32 logits."""
    t = 2 * 1000
    assert activation_reserve_bytes(llama8b, 2, 1000) == t * (2 * 4096 + 2 * 14336) * 2 + 2 * 128256 * 4


@pytest.mark.fast
def test_a_tensor_parallel_degree_must_split_the_model(llama8b):
    with pytest.raises(GpusimError, match=r"--tp 3: llama-3-8b's heads \(32\) is not a multiple"):
        check_tp(llama8b, 3)
    assert check_tp(llama8b, 8) == 8


# ------------------------------------------------------------------------------------------------ model files

@pytest.mark.fast
def test_a_hugging_face_config_reads_as_the_shipped_model(tmp_path, llama8b):
    """config.json's fields map to ours; head_dim defaults to hidden / heads as transformers gives it."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_8B_CONFIG))
    model = load_model(str(path))
    assert model.name == "Meta-Llama-3-8B"
    assert attrs.evolve(model, name=llama8b.name, source=llama8b.source) == llama8b


@pytest.mark.fast
def test_a_hugging_face_moe_config_gives_its_experts(tmp_path):
    config = {**LLAMA_8B_CONFIG, "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000}
    path = tmp_path / "mixtral.json"
    path.write_text(json.dumps(config))
    model = load_model(str(path))
    assert (model.experts, model.experts_per_token) == (8, 2)
    assert parameter_count(model) == 46_702_792_704


@pytest.mark.fast
@pytest.mark.parametrize("change, message", [
    ({"hidden_size": None}, r"config.json: hidden_size: missing"),
    ({"num_hidden_layers": "32"}, r"config.json: num_hidden_layers: expected a whole number"),
    ({"torch_dtype": "int4"}, r"config.json: torch_dtype: expected one of float32, float16, bfloat16"),
    ({"num_key_value_heads": 5}, r"config.json: kv_heads: expected a divisor of heads \(32\), got 5"),
    ({"num_experts_per_tok": 4, "num_local_experts": 2}, r"experts_per_token: expected at most experts \(2\)"),
])
def test_a_bad_hugging_face_field_is_one_line_naming_it(short_tmp_path, change, message):
    config = {k: v for k, v in {**LLAMA_8B_CONFIG, **change}.items() if v is not None}
    path = short_tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ModelError, match=message) as info:
        load_model(str(path))
    assert "\n" not in str(info.value)


@pytest.mark.fast
@pytest.mark.parametrize("text, message", [
    (TINY + "rope: 10000\n", r"tiny.yaml: 'rope': unknown field"),
    (TINY.replace("ffn: 1024\n", ""), r"tiny.yaml: ffn: missing"),
    (TINY.replace("dtype: fp16", "dtype: half"), r"tiny.yaml: dtype: expected one of fp32, fp16, bf16, fp8"),
    (TINY.replace("layers: 2", "layers: -2"), r"tiny.yaml: layers: expected a whole number from 1"),
    (TINY.replace("layers: 2", "layers: [2"), r"tiny.yaml: not valid YAML"),
    ("- 1\n", r"tiny.yaml: expected a mapping of fields"),
])
def test_a_bad_model_file_is_one_line_naming_the_field(short_tmp_path, text, message):
    path = short_tmp_path / "tiny.yaml"
    path.write_text(text)
    with pytest.raises(ModelError, match=message) as info:
        load_model(str(path))
    assert "\n" not in str(info.value)


@pytest.mark.fast
def test_an_unknown_model_lists_the_shipped_ones():
    with pytest.raises(ModelError, match=r"--model llama-9: no such model \(shipped: llama-3-70b, llama-3-8b, "
                                         r"mixtral-8x7b\)"):
        load_model("llama-9")


@pytest.mark.fast
def test_every_hugging_face_field_maps_to_a_model_field():
    assert set(HF_FIELDS.values()) <= set(attrs.fields_dict(ModelConfig))


# ------------------------------------------------------------------------------------------------ kernels

@pytest.mark.fast
@pytest.mark.parametrize("arch, gemm, attention", [
    ("h100", "gemm_hopper_ws", "flash_attention3"), ("b200", "gemm_blackwell_umma", "flash_attention"),
    ("a100", "gemm_tile128", "flash_attention"), ("v100", "gemm_tile128_sync", "flash_attention_simple")])
def test_prefill_uses_the_parts_gemm_and_attention(llama8b, arch, gemm, attention):
    """wgmma kernels on Hopper, tcgen05 on Blackwell (FlashAttention-3 needs wgmma: FA2 there), cp.async before."""
    kernels = {k.role: k for k in prefill_kernels(llama8b, load_arch(arch), batch=1, prompt=512)}
    assert kernels["qkv"].workload == f"workloads/{gemm}.yaml"
    assert kernels["qkv"].params == {"M": 512, "N": 6144, "K": 4096}
    assert kernels["gate_up"].params["N"] == 2 * 14336
    assert kernels["attention"].workload == f"workloads/{attention}.yaml"
    assert kernels["lm_head"].workload == "workloads/gemv.yaml"  # the last token only
    assert 0.5 < kernels["attention"].scale < 0.7  # the causal share of the key tiles


@pytest.mark.fast
def test_a_prefill_rounds_its_rows_up_to_the_tile_and_says_so(llama8b):
    qkv = next(k for k in prefill_kernels(llama8b, H100, batch=1, prompt=300) if k.role == "qkv")
    assert qkv.params["M"] == 512 and "M 300 -> 512" in qkv.notes[0]
    assert qkv.flop == 2 * 300 * 6144 * 4096


@pytest.mark.fast
def test_decode_runs_gemvs_and_split_kv_attention(llama8b):
    """At M = batch the projections are GEMVs; attention covers the context in whole splits."""
    kernels = {k.role: k for k in decode_kernels(llama8b, H100, batch=4, context=1000, tp=2)}
    assert all(kernels[r].workload == "workloads/gemv.yaml" for r in ("qkv", "o_proj", "gate_up", "down", "lm_head"))
    assert kernels["qkv"].params["N"] == (16 + 2 * 4) * 128 and kernels["qkv"].params["B"] == 4
    attention = kernels["attention"].params
    assert (attention["heads_q"], attention["heads_kv"]) == (16, 4)
    assert 1000 <= attention["seq"] < 1000 * 1.1


@pytest.mark.fast
@pytest.mark.parametrize("n, k, rows", [(6144, 4096, 1), (4096, 14336, 8), (1280, 8192, 16), (16032, 8192, 64),
                                        (768, 512, 3), (128256, 4096, 2), (100, 100, 1)])
def test_gemv_parameters_meet_the_workloads_constraints(n, k, rows):
    """N a multiple of 16 x ROWS, K of 16 x KS x WK x U with U even, and neither rounded by more than a tile."""
    p, notes = gemv_params(n, k, rows, H100.sms)
    assert p["N"] % (16 * p["ROWS"]) == 0 and n <= p["N"] < n + 16 * p["ROWS"]
    assert p["K"] % (16 * p["KS"] * p["WK"] * p["U"]) == 0 and p["U"] % 2 == 0 and p["K"] >= k
    assert p["B"] == rows <= GEMV_MAX_ROWS
    assert bool(notes) == (p["N"] != n or p["K"] != k)


@pytest.mark.fast
def test_an_moe_decode_step_touches_the_experts_its_tokens_pick():
    mixtral = load_model("mixtral-8x7b")
    assert active_experts(mixtral, 1) == 2 and active_experts(mixtral, 64) == 8
    gate_up = next(k for k in decode_kernels(mixtral, H100, batch=1, context=512) if k.role == "gate_up")
    assert gate_up.params["N"] == 2 * 2 * 14336  # two experts' gate and up rows, one grouped GEMV


# ------------------------------------------------------------------------------------------------ end to end

@pytest.fixture(scope="module")
def tiny_estimate(tiny, tmp_path_factory):
    cache = KernelCache(tmp_path_factory.mktemp("kernels"))
    return estimate(str(tiny), "h100", batch=1, prompt=256, generate=16, cache=cache), cache


def test_an_estimate_is_no_faster_than_reading_its_weights(tiny_estimate):
    """A decode step reads every weight of its GPU: the time per output token is at least weights / peak DRAM
    bandwidth, and the record says so without a physical-limit warning."""
    result, _ = tiny_estimate
    peak = H100.memory.dram.bandwidth_gbs * 1e9
    assert result.time_per_output_token_s >= weight_bytes(result.model).total / peak
    assert result.time_per_output_token_s >= result.decode_floor_s
    assert result.time_to_first_token_s > 0 and result.tokens_per_s == pytest.approx(1 / result.time_per_output_token_s)
    assert not any("physical limit" in w for w in result.warnings)
    record = result.to_dict()
    assert record["kv_cache_bytes"] == 2 * 2 * 2 * 64 * 2 * (256 + 16)
    assert {k["phase"] for k in record["kernels"]} == {"prefill", "decode"} and record["allreduce_s"] == 0.0


def test_an_estimate_is_the_same_every_run(tiny, tiny_estimate):
    """The same inputs give the same record, from the cache or simulated again."""
    first, cache = tiny_estimate
    again = estimate(str(tiny), "h100", batch=1, prompt=256, generate=16, cache=cache)
    fresh = estimate(str(tiny), "h100", batch=1, prompt=256, generate=16, cache=None)
    assert again.simulated == 0 and fresh.simulated == first.simulated > 0

    def record(result):
        return json.dumps({**result.to_dict(), "simulated": None})

    assert record(first) == record(again) == record(fresh)


def test_tensor_parallel_adds_the_all_reduces(tiny, tiny_estimate):
    """Over two GPUs every layer adds two all-reduces of its rows x hidden, from the arch's NVLink figures."""
    _, cache = tiny_estimate
    result = estimate(str(tiny), "h100", batch=1, prompt=256, generate=16, tp=2, cache=cache)
    assert result.decode_allreduce_s > 0 and result.prefill_allreduce_s > result.decode_allreduce_s
    assert result.memory.weight_bytes < weight_bytes(result.model).total


def test_the_command_prints_the_estimate_and_writes_json(tiny, tmp_path):
    proc = run_cli("llm", "--model", str(tiny), "--arch", "h100", "--prompt", "256", "--generate", "16",
                   "--json", str(tmp_path / "out.json"), "--plot", str(tmp_path / "plots"), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "time per output token" not in proc.stderr
    assert "tokens/s" in proc.stdout and "decode" in proc.stdout
    record = json.loads((tmp_path / "out.json").read_text())
    assert record["model"]["name"] == "tiny" and record["fits_in_memory"]
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["llm_tiny_h100_breakdown.png",
                                                                      "llm_tiny_h100_roofline.png"]


@pytest.mark.fast
@pytest.mark.parametrize("args, message", [
    (["--model", "llama-9", "--arch", "h100"], "error: --model llama-9: no such model"),
    (["--model", "llama-3-8b", "--arch", "h100", "--tp", "3"], "error: --tp 3: llama-3-8b's heads (32)"),
    (["--model", "llama-3-8b", "--arch", "h100", "--batch", "0"], "--batch: expected an integer >= 1, got 0"),
    (["--model", "llama-3-8b", "--arch", "h100", "--kv-dtype", "int8"], "--kv-dtype: invalid choice: 'int8'"),
])
def test_the_commands_bad_input_is_one_line(args, message):
    proc = run_cli("llm", *args)
    assert proc.returncode != 0
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.fast
def test_a_plot_directory_that_cannot_be_made_is_refused_before_simulating(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_cli("llm", "--model", "llama-3-8b", "--arch", "h100", "--plot", str(blocker))
    assert proc.returncode == 1 and proc.stdout == ""
    assert "cannot create the directory" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
