#!/usr/bin/env bash
# One run on a Hopper GPU that measures what the published-kernel comparison needs and the stored results lack:
# the microbenchmarks built for sm_90a (the wgmma rates and the SM clock they hold, which --clock sustained and
# `gpusim calibrate` take; F2FP's rate and whether it shares the SFU's pipe), and the CUDA twins of the attention
# and GEMM workloads at the published table's shapes (validation/published.yaml), each a JSON line; and, where
# Nsight Compute can read the counters, the mma.sync GEMM's and FlashAttention-2's units (OUT/ncu-*.csv).
#
#   bash validation/device_check.sh [OUT]      (OUT: a folder, default ./device-results; needs nvcc and a GPU)
#
# Then: gpusim calibrate --from OUT/microbench.json -o h200-cal.yaml, and compare OUT/twins.jsonl with
# `python validation/published.py --rows ...` (the same shapes) by hand; commit both under validation/results/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-device-results}
mkdir -p "$out/bin"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory,power.limit,driver_version --format=csv \
    > "$out/nvidia-smi.csv"
nvcc -O3 -std=c++17 -arch=sm_90a -lineinfo -o "$out/bin/microbench" "$here/microbench.cu"
for twin in flash_attention gemm_hopper_ws gemm_tile128; do
    nvcc -O3 -std=c++17 -arch=sm_90a -o "$out/bin/$twin" "$here/kernels/$twin.cu"
done
# the SM clock while the twins run, sampled every 100 ms (what the power limit held)
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$out/clocks.csv" &
smi=$!
trap 'kill $smi 2>/dev/null || true' EXIT
"$out/bin/microbench" > "$out/microbench.json"
{
    # FlashAttention-2 at the published rows' shapes, with the library's tiles
    for s in "batch=8 heads=32 seq=2048 d=64" "batch=1 heads=32 seq=16384 d=64"; do
        "$out/bin/flash_attention" $s BM=128 BN=128 WARPS=4 reps=10
    done
    for s in "batch=8 heads=16 seq=2048 d=128" "batch=1 heads=16 seq=16384 d=128"; do
        "$out/bin/flash_attention" $s BM=128 BN=64 WARPS=4 reps=10
    done
    "$out/bin/flash_attention" batch=8 heads=8 seq=2048 d=256 BM=64 BN=64 WARPS=4 reps=10
    # the GEMMs: the cuBLAS rows' sizes (Hopper kernel) and the mma.sync kernel at 4096^3
    for n in 6144 8192; do "$out/bin/gemm_hopper_ws" M=$n N=$n K=$n reps=5; done
    "$out/bin/gemm_tile128" M=4096 N=4096 K=4096 reps=5
} > "$out/twins.jsonl"
# Nsight Compute on the twins, where the machine lets it read the counters (each profile is optional): the mma.sync
# GEMM's busiest unit (whether cp.async's fills into shared memory take the L1TEX data stage's cycles beside
# ldmatrix's reads: the data pipe's wavefronts and the banks' reads and writes) and FlashAttention-2's pipes
if command -v ncu >/dev/null 2>&1; then
    sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables"
    banks="l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_ldgsts.sum,l1tex__data_bank_reads.sum,l1tex__data_bank_writes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"
    ncu $sections --csv --page details "$out/bin/gemm_tile128" M=4096 N=4096 K=4096 reps=1 \
        > "$out/ncu-gemm_tile128.csv" 2>&1 || true
    ncu --metrics "$banks" --csv "$out/bin/gemm_tile128" M=4096 N=4096 K=4096 reps=1 \
        > "$out/ncu-gemm_tile128-banks.csv" 2>&1 || true
    ncu $sections --csv --page details "$out/bin/flash_attention" batch=1 heads=32 seq=16384 d=64 BM=128 BN=128 \
        WARPS=4 reps=1 > "$out/ncu-flash_attention.csv" 2>&1 || true
fi
echo "wrote $out/microbench.json, $out/twins.jsonl, $out/clocks.csv (and $out/ncu-*.csv where ncu could profile)"
