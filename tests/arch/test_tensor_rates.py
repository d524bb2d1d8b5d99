"""Tensor-core rates by precision (pipelines.tensor.rates, gpusim.isa.tensor): NVIDIA's figures, consistent with the
FP16 peak the engine uses, and the opcode -> precision mapping the timing table reads."""

import json

import attrs
import pytest

from gpusim import ArchError, GpusimError, load_arch
from gpusim.arch import arch_dir, parse_arch
from gpusim.arch.load import read_yaml
from gpusim.isa.tensor import (PRECISIONS, available_precisions, fp16_peak, is_sparse, mma_precision,
                                precision_scale, require_tensor_rate, tensor_rate)

from tests.conftest import ARCH_NAMES, run_cli

# NVIDIA's dense figures, TFLOPS (integers: TOPS), per GPU, from the sources each arch file names ([TR] lines):
# datasheet "with sparsity" figures halved where only those are printed.
PUBLISHED_DENSE = {
    "v100": {"fp16": 125},
    "t4": {"fp16": 65, "int8": 130, "int4": 260},
    "a100": {"fp16": 312, "bf16": 312, "tf32": 156, "int8": 624, "int4": 1248},
    "l40s": {"fp16": 362.05, "bf16": 362.05, "tf32": 183, "fp8": 733},
    "h100": {"fp16": 989.4, "bf16": 989.4, "tf32": 494.7, "fp8": 1978.9, "int8": 1978.9},
    "h200": {"fp16": 989.4, "bf16": 989.4, "tf32": 494.7, "fp8": 1978.9, "int8": 1978.9},
    "b200": {"fp16": 2250, "bf16": 2250, "tf32": 1100, "fp8": 4500, "fp6": 4500, "fp4": 9000, "int8": 4500},
    "b300": {"fp16": 2250, "bf16": 2250, "tf32": 1125, "fp8": 4500, "fp6": 4500, "fp4": 13500, "int8": 125},
}
# Not printed for the part, derived in its arch file: the L40S datasheet gives INT8 / INT4 only for the L40, at its
# FP8 rate and twice it (same AD102 SM); the L40S has twice the L40's FP8.
DERIVED_DENSE = {"l40s": {"int8": 733, "int4": 1466}}
# Where NVIDIA's sparse figure is not twice the dense one: HGX B300 "FP4 Tensor Core 144 PFLOPS | 108 PFLOPS".
NOT_TWICE = {("b300", "fp4")}


def _tflops(spec, precision, sparse=False):
    return tensor_rate(spec, precision, sparse) * spec.sms * spec.clocks.tensor_mhz * 1e6 / 1e12


@pytest.mark.fast
@pytest.mark.parametrize("name", ARCH_NAMES)
def test_fp16_dense_rate_is_the_engines_peak(name):
    """The fp16 dense rate is sub_partitions x dense_fp16_flops_per_clock, the peak the timing table uses."""
    spec = load_arch(name)
    assert spec.pipelines.tensor.rates.fp16.dense == spec.sm.sub_partitions * spec.pipelines.tensor.dense_fp16_flops_per_clock
    assert tensor_rate(spec, "fp16") == fp16_peak(spec)
    assert _tflops(spec, "fp16") == pytest.approx(spec.peak_fp16_tensor_tflops, rel=1e-12)


@pytest.mark.fast
@pytest.mark.parametrize("name", ARCH_NAMES)
def test_derived_peaks_within_3_percent_of_nvidias_figures(name):
    """Every precision's rate x SMs x tensor clock is NVIDIA's dense figure within 3%, and the arch has exactly the
    precisions NVIDIA lists for it (the rest are absent; the L40S's INT8 / INT4 are derived from the L40's)."""
    spec = load_arch(name)
    published = {**PUBLISHED_DENSE[name], **DERIVED_DENSE.get(name, {})}
    assert available_precisions(spec) == [p for p in PRECISIONS if p in published]
    for precision, figure in published.items():
        assert _tflops(spec, precision) == pytest.approx(figure, rel=0.03), precision


@pytest.mark.fast
@pytest.mark.parametrize("name", ARCH_NAMES)
def test_rates_do_not_fall_as_precision_narrows(name):
    """Dense rates are non-decreasing as precision narrows on every arch that has them: tf32 <= fp16 = bf16 <= fp8
    <= fp6 <= fp4, and int8 <= int4."""
    spec = load_arch(name)
    chain = [p for p in ("tf32", "fp16", "fp8", "fp6", "fp4") if tensor_rate(spec, p) is not None]
    rates = [tensor_rate(spec, p) for p in chain]
    assert rates == sorted(rates), list(zip(chain, rates))
    if tensor_rate(spec, "bf16") is not None:
        assert tensor_rate(spec, "bf16") == tensor_rate(spec, "fp16")
    if tensor_rate(spec, "int4") is not None:
        assert tensor_rate(spec, "int8") <= tensor_rate(spec, "int4")


@pytest.mark.fast
@pytest.mark.parametrize("name", ARCH_NAMES)
def test_sparse_is_twice_dense(name):
    """Sparse = 2x dense for every precision with a sparse figure (the one exception, B300 FP4, is NVIDIA's own:
    144 PF sparse for 108 PF dense); parts before Ampere have no sparse path at all."""
    spec = load_arch(name)
    for precision in available_precisions(spec):
        sparse = tensor_rate(spec, precision, sparse=True)
        if spec.cc_major < 8:
            assert sparse is None
        elif (name, precision) in NOT_TWICE:
            assert tensor_rate(spec, precision) < sparse < 2 * tensor_rate(spec, precision)
        else:
            assert sparse == 2 * tensor_rate(spec, precision), precision


@pytest.mark.fast
def test_absent_precisions_are_none_and_a_one_line_error():
    """A precision without a tensor path is None (FP8 on the A100, FP4 on the H100), and require_tensor_rate says
    so in one line naming the precisions the part has."""
    a100, h100 = load_arch("a100"), load_arch("h100")
    assert tensor_rate(a100, "fp8") is None and tensor_rate(h100, "fp4") is None
    assert precision_scale(h100, "fp4") is None
    with pytest.raises(GpusimError) as err:
        require_tensor_rate(h100, "fp4")
    message = str(err.value)
    assert "\n" not in message and "h100 has no fp4" in message and "fp8" in message
    with pytest.raises(GpusimError, match="no sparse fp16"):
        require_tensor_rate(load_arch("v100"), "fp16", sparse=True)
    with pytest.raises(GpusimError, match="unknown tensor precision 'fp7'"):
        tensor_rate(h100, "fp7")


@pytest.mark.fast
def test_precision_scale_is_the_factor_over_fp16():
    """precision_scale is the rate over the dense FP16 peak: FP8 2x and TF32 0.5x on Hopper, FP4 4x on the B200."""
    h100, b200 = load_arch("h100"), load_arch("b200")
    assert precision_scale(h100, "fp8") == 2.0 and precision_scale(h100, "tf32") == 0.5
    assert precision_scale(h100, "fp16", sparse=True) == 2.0
    assert precision_scale(b200, "fp4") == 4.0


@pytest.mark.fast
def test_rates_follow_a_what_if_on_the_fp16_peak():
    """Doubling dense_fp16_flops_per_clock (a what-if) doubles every precision's rate: they are read relative to
    the engine's FP16 peak."""
    spec = load_arch("h100")
    tensor = attrs.evolve(spec.pipelines.tensor, dense_fp16_flops_per_clock=2048)
    faster = attrs.evolve(spec, pipelines=attrs.evolve(spec.pipelines, tensor=tensor))
    for precision in available_precisions(spec):
        assert tensor_rate(faster, precision) == 2 * tensor_rate(spec, precision)


@pytest.mark.fast
def test_an_arch_without_a_rates_table_knows_fp16_dense_only():
    """A custom arch file without `rates` loads; its FP16 dense rate is the engine's peak and the rest is None."""
    data = read_yaml(arch_dir() / "h100.yaml")
    del data["pipelines"]["tensor"]["rates"]
    spec = parse_arch(data, "custom.yaml")
    assert tensor_rate(spec, "fp16") == 4096 and tensor_rate(spec, "fp8") is None
    assert tensor_rate(spec, "fp16", sparse=True) is None


@pytest.mark.fast
@pytest.mark.parametrize("change, expected", [
    ({"fp16": {"dense": 2048, "sparse": 4096}}, "'pipelines.tensor.rates.fp16.dense' (line"),
    ({"fp8": {"dense": 8192, "sparse": 20000}}, "'pipelines.tensor.rates.fp8.sparse'"),
    ({"fp5": {"dense": 1}}, "unknown key 'pipelines.tensor.rates.fp5'"),
    ({"int8": {"dense": True}}, "'pipelines.tensor.rates.int8.dense'"),
])
def test_bad_rates_are_one_line_errors(change, expected):
    """A rates table that disagrees with the FP16 peak, a sparse rate outside dense..2x dense, an unknown precision
    or a non-integer rate is a one-line ArchError naming the key."""
    data = read_yaml(arch_dir() / "h100.yaml")
    data["pipelines"]["tensor"]["rates"].update(change)
    with pytest.raises(ArchError) as err:
        parse_arch(data, "bad.yaml")
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.fast
@pytest.mark.parametrize("opcode, precision", [
    ("HMMA.884.F32.F32", "fp16"), ("HMMA.1688.F16", "fp16"), ("HMMA.16816.F32", "fp16"),
    ("HMMA.16816.F32.BF16", "bf16"), ("HMMA.1684.F32.TF32", "tf32"), ("HMMA.1688.F32.TF32", "tf32"),
    ("HMMA.SP.16832.F32.BF16", "bf16"),
    ("IMMA.8816.S8.S8", "int8"), ("IMMA.16832.S8.S8.SAT", "int8"), ("IMMA.16832.U8.S8", "int8"),
    ("IMMA.8832.U4.U4", "int4"), ("IMMA.16864.S4.S4", "int4"),
    ("HGMMA.64X128X16.F32", "fp16"), ("HGMMA.64X128X16.F32.BF16", "bf16"), ("HGMMA.64X64X8.F32.TF32", "tf32"),
    ("QGMMA.64X128X32.F32.E4M3.E4M3", "fp8"), ("QGMMA.64X128X32.F16.E5M2.E4M3", "fp8"),
    ("IGMMA.64X128X32.S32.S8.S8", "int8"),
    ("UTCHMMA", "fp16"), ("UTCHMMA.BF16", "bf16"), ("UTCHMMA.TF32", "tf32"), ("UTCIMMA.S8", "int8"),
    ("UTCQMMA.E4M3.E4M3", "fp8"), ("UTCQMMA.E4M3.E2M1", "fp8"), ("UTCQMMA.E3M2.E2M3", "fp6"),
    ("UTCQMMA.E2M1.E2M1", "fp6"), ("UTCOMMA.E2M1.E2M1", "fp4"), ("OMMA.16864.F32.E2M1", "fp4"),
    ("QMMA.16832.F32.E4M3.E4M3", "fp8"),
    ("DMMA.884", None), ("BMMA.88128.AND.POPC", None), ("BGMMA.64X128X256", None), ("FFMA", None),
    ("LDS.128", None),
])
def test_mma_precision(opcode, precision):
    """An MMA opcode's input precision comes from its base name and type modifiers (the accumulator's .F32 / .F16
    does not change it; mixed operands run at the wider type; FP4 operands of the f8f6f4 kind at the FP6 rate);
    FP64, single-bit and non-MMA opcodes have no rate row."""
    assert mma_precision(opcode) == precision
    assert mma_precision(opcode.lower()) == precision


@pytest.mark.fast
def test_every_mapped_precision_is_a_known_one():
    """mma_precision only ever answers with a precision the rates tables have a row for."""
    for base in ("HMMA", "HGMMA", "UTCHMMA", "IMMA", "IGMMA", "UTCIMMA", "QGMMA", "QMMA", "UTCQMMA", "OMMA",
                 "UTCOMMA"):
        for mods in ("", ".BF16", ".TF32", ".E4M3", ".E5M2", ".E3M2", ".E2M3", ".E2M1", ".S8", ".U4", ".S4.S8"):
            assert mma_precision(base + mods) in PRECISIONS


@pytest.mark.fast
@pytest.mark.parametrize("opcode, sparse", [("HMMA.SP.16832.F32", True), ("IMMA.SP.16864.S8.S8", True),
                                            ("HMMA.16816.F32", False), ("SPHMMA", False)])
def test_is_sparse(opcode, sparse):
    """The .SP modifier marks the 2:4 structured-sparse form."""
    assert is_sparse(opcode) is sparse


def test_archs_json_lists_rates_with_null_for_absent():
    """`gpusim archs --json` carries each arch's tensor_rates (null where a precision is absent) and dense
    tensor_tflops."""
    p = run_cli("archs", "--json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["h100"]["tensor_rates"]["fp8"] == {"dense": 8192.0, "sparse": 16384.0}
    assert rows["h100"]["tensor_rates"]["fp4"] is None and rows["a100"]["tensor_rates"]["fp8"] is None
    assert rows["b200"]["tensor_tflops"]["fp4"] == pytest.approx(9000, rel=0.03)
    assert set(rows["v100"]["tensor_rates"]) == set(PRECISIONS)


def test_archs_table_shows_tensor_peaks():
    """The `gpusim archs` table has a tensor-peak row per arch with one column per precision."""
    p = run_cli("archs")
    assert p.returncode == 0, p.stderr
    assert "tensor-core peaks by input precision" in p.stdout
    assert "FP8" in p.stdout and "INT4" in p.stdout and "1978.9 x2 sp" in p.stdout
