// reduction twin of workloads/reduction.yaml: each thread loads one float into shared memory; log2(threads) steps
// halve the active threads (if tid < s: sdata[tid] += sdata[tid + s]) with a barrier after each; thread 0 writes
// the block's sum.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o reduction reduction.cu; run: ./reduction [n=1048576] [log2_threads=8]
#include "twin.h"

__global__ void reduction(const float* __restrict__ x, float* __restrict__ out) {
    extern __shared__ float sdata[];
    unsigned tid = threadIdx.x;
    sdata[tid] = x[blockIdx.x * (size_t)blockDim.x + tid];
    __syncthreads();
    for (unsigned s = blockDim.x >> 1; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"n", 1048576}, {"log2_threads", 8}});
    long long n = p["n"], threads = 1LL << p["log2_threads"];
    float* x = twin_alloc<float>(n);
    float* out = twin_alloc<float>(n / threads);
    dim3 grid((unsigned)(n / threads)), block((unsigned)threads);
    size_t smem = threads * sizeof(float);
    auto ms = twin_time([&] { reduction<<<grid, block, smem>>>(x, out); }, p.reps);
    twin_report("reduction", "workloads/reduction.yaml", p, grid, block, smem, ms);
    return 0;
}
