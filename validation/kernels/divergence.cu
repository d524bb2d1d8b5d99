// divergence twin of workloads/microbench/divergence.yaml: if (idx < n) { if (idx % 2 == 0) data[idx] *= 2.0f;
// else data[idx] += 1.0f; }, `iters` times per thread: both sides of the branch run under half-warp masks.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o divergence divergence.cu; run: ./divergence [n=65536] [iters=4]
#include "twin.h"

__global__ void divergence(volatile float* data, long long n, int iters) {
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    for (int i = 0; i < iters; i++) {
        float v = data[idx];
        if (idx % 2 == 0) data[idx] = v * 2.0f;
        else data[idx] = v + 1.0f;
    }
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"n", 65536}, {"iters", 4}});
    long long n = p["n"];
    float* data = twin_alloc<float>(n);
    dim3 grid((unsigned)((n + 255) / 256)), block(256);
    auto ms = twin_time([&] { divergence<<<grid, block>>>(data, n, (int)p["iters"]); }, p.reps);
    twin_report("divergence", "workloads/microbench/divergence.yaml", p, grid, block, 0, ms);
    return 0;
}
