// stream twin of workloads/microbench/stream.yaml: b = a over n floats, `unroll` 16-byte loads in flight per
// thread per trip of a grid-stride loop, then as many stores (read=1: the loads summed with FADDs, no stores).
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o stream stream.cu; run: ./stream [n=268435456] [unroll=4] [blocks=1024]
//        [threads=256] [read=0] [reps=20]
#include "twin.h"

template <int UNROLL>
__global__ void stream(const float4* __restrict__ a, float4* __restrict__ b, float* out, long long n, int read) {
    long long total = (long long)gridDim.x * blockDim.x, gtid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long trips = n / (4LL * UNROLL * total);
    float s = 0.f;
    for (long long i = 0; i < trips; i++) {
        float4 v[UNROLL];
#pragma unroll
        for (int r = 0; r < UNROLL; r++) v[r] = a[(i * UNROLL + r) * total + gtid];
        if (read) {
#pragma unroll
            for (int r = 0; r < UNROLL; r++) s += v[r].x + v[r].y + v[r].z + v[r].w;
        } else {
#pragma unroll
            for (int r = 0; r < UNROLL; r++) b[(i * UNROLL + r) * total + gtid] = v[r];
        }
    }
    if (read && s == 12345.f) out[0] = s;
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"n", 268435456}, {"unroll", 4}, {"blocks", 1024}, {"threads", 256}, {"read", 0}});
    long long n = p["n"];
    int unroll = (int)p["unroll"], read = (int)p["read"];
    float4* a = twin_alloc<float4>(n / 4);
    float4* b = twin_alloc<float4>(read ? 1 : n / 4);
    float* out = twin_alloc<float>(1);
    dim3 grid((unsigned)p["blocks"]), block((unsigned)p["threads"]);
    auto launch = [&] {
        switch (unroll) {
            case 1: stream<1><<<grid, block>>>(a, b, out, n, read); break;
            case 2: stream<2><<<grid, block>>>(a, b, out, n, read); break;
            case 8: stream<8><<<grid, block>>>(a, b, out, n, read); break;
            default: stream<4><<<grid, block>>>(a, b, out, n, read); break;
        }
    };
    if (unroll != 1 && unroll != 2 && unroll != 4 && unroll != 8) { std::fprintf(stderr, "unroll: 1, 2, 4 or 8\n"); return 2; }
    auto ms = twin_time(launch, p.reps);
    twin_report("stream", "workloads/microbench/stream.yaml", p, grid, block, 0, ms);
    return 0;
}
