// transpose twin of validation/workloads/transpose.yaml: out = transpose(inp) for an N x N float matrix through a
// 32 x (32 + pad) shared tile, blocks of 32 x 8 threads. pad=0: the tile's columns sit in one bank, so each
// column read is a 32-way bank conflict; pad=1 removes them.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o transpose transpose.cu; run: ./transpose [N=4096] [pad=0]
#include "twin.h"

template <int PAD>
__global__ void transpose(const float* __restrict__ inp, float* __restrict__ out, int N) {
    __shared__ float tile[32 * (32 + PAD)];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
#pragma unroll
    for (int r = 0; r < 4; r++) tile[(threadIdx.y + r * 8) * (32 + PAD) + threadIdx.x] = inp[(size_t)(y + r * 8) * N + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
#pragma unroll
    for (int r = 0; r < 4; r++) out[(size_t)(y + r * 8) * N + x] = tile[threadIdx.x * (32 + PAD) + threadIdx.y + r * 8];
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"N", 4096}, {"pad", 0}});
    int N = (int)p["N"];
    float *inp = twin_alloc<float>((size_t)N * N), *out = twin_alloc<float>((size_t)N * N);
    dim3 grid(N / 32, N / 32), block(32, 8);
    auto launch = [&] {
        if (p["pad"]) transpose<1><<<grid, block>>>(inp, out, N);
        else transpose<0><<<grid, block>>>(inp, out, N);
    };
    auto ms = twin_time(launch, p.reps);
    twin_report("transpose", "validation/workloads/transpose.yaml", p, grid, block, 0, ms);
    return 0;
}
