// vecadd twin of workloads/vecadd.yaml: c[i] = a[i] + b[i], one element per thread, threads past n exit.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o vecadd vecadd.cu; run: ./vecadd [n=1048576] [threads=256] [reps=20]
#include "twin.h"

__global__ void vecadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, long long n) {
    long long gtid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (gtid >= n) return;
    c[gtid] = a[gtid] + b[gtid];
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"n", 1048576}, {"threads", 256}});
    long long n = p["n"], threads = p["threads"];
    float *a = twin_alloc<float>(n), *b = twin_alloc<float>(n), *c = twin_alloc<float>(n);
    dim3 grid((unsigned)((n + threads - 1) / threads)), block((unsigned)threads);
    auto ms = twin_time([&] { vecadd<<<grid, block>>>(a, b, c, n); }, p.reps);
    twin_report("vecadd", "workloads/vecadd.yaml", p, grid, block, 0, ms);
    return 0;
}
