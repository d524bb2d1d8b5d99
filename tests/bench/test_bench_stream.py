"""Benchmarks (excluded from the default run; `python -m pytest -m benchmark -n 0 tests/bench`: in one process,
as timings need)."""

import pytest

from gpusim.workload import kernel_mix, load_workload, warp_stream

from ..conftest import ROOT

pytestmark = pytest.mark.benchmark


def _generate(kernel, blocks):
    n = 0
    for block in range(blocks):
        for w in range(kernel.launch.warps_per_block):
            for _ in warp_stream(kernel, block, w):
                n += 1
    return n


@pytest.mark.parametrize("name, params", [
    ("gemm_tile128", {"M": 1024, "N": 1024, "K": 1024}),
    ("microbench/fma_peak", {}),
    ("kv_decode", {}),
])
def test_stream_generation(benchmark, name, params):
    kernel = load_workload(ROOT / f"workloads/{name}.yaml", params)
    n = benchmark.pedantic(_generate, args=(kernel, 4), rounds=3, iterations=1)
    benchmark.extra_info["warp_instructions"] = n
    benchmark.extra_info["warp_instructions_per_second"] = n / benchmark.stats.stats.mean


def test_gemm_mix_counting(benchmark):
    kernel = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml")
    mix = benchmark(kernel_mix, kernel)
    assert mix.total_warp_insts == 60_981_248


def test_occupancy_call(benchmark):
    from gpusim import occupancy as occ

    result = benchmark(occ, "h100", 256, 48, 65536)
    assert result.blocks_per_sm == 3
