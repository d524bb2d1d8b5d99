// kv_decode twin of workloads/kv_decode.yaml: one new token attends over a GQA KV cache, split over the sequence
// as FlashDecoding does. Each (batch, KV head) gets `splits` blocks of four warps; a block owns seq / splits keys
// and each warp a quarter of them. Per trip a warp issues `unroll` 16-byte loads of K rows and `unroll` of V rows
// together (d / 8 lanes per row, 256 / d keys per load), then dots K with the group's query heads (HFMA2), reduces
// across the row's lanes (shuffles), runs the online softmax (max, exp2 on the SFU, the running sum, the rescale)
// and accumulates P V (HFMA2). The four warps combine their partial outputs through shared memory and warp 0
// writes the block's (FP32, with its sums). The merge of the splits (a second, tiny kernel) is not timed, as the
// YAML does not simulate it.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o kv_decode kv_decode.cu
// Run:   ./kv_decode [batch=4] [heads_q=32] [heads_kv=8] [d=128] [seq=2048] [splits=16] [unroll=4] [dtype_bytes=2]
//        (d 128, heads_q / heads_kv 4, unroll 4: the compiled shape; seq * d a multiple of splits * unroll * 1024)
#include "twin.h"

__device__ __forceinline__ __half2 h2(uint4 v, int e) {  // the e-th pair of halves of a 16-byte value
    unsigned u = e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
    __half2 h;
    memcpy(&h, &u, 4);
    return h;
}

constexpr int D = 128, G = 4, UNROLL = 4, CH = D / 8;  // 16 lanes per K row, 2 rows per 16-byte warp load

__global__ void __launch_bounds__(128) kv_decode(const uint4* __restrict__ q, const uint4* __restrict__ k_cache,
                                                 const uint4* __restrict__ v_cache, float* __restrict__ partial,
                                                 int heads_q, int heads_kv, int seq, int splits) {
    __shared__ __align__(16) float combine[4][G * D];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int bh = blockIdx.x / splits, split = blockIdx.x % splits;  // (batch, KV head), the block's split
    const int b = bh / heads_kv, h = bh % heads_kv;
    // the group's G query vectors: G x d halves, 512 bytes per warp instruction
    uint4 qv[G * D * 2 / 512];
#pragma unroll
    for (int rep = 0; rep < G * D * 2 / 512; rep++)
        qv[rep] = q[((size_t)(b * heads_q + h * G) * D * 2 + (rep * 32 + lane) * 16) / 16];
    uint4 qh[G];  // head g's chunk lane % 16 (held by lane (g % 2) * 16 + lane % 16 in qv[g / 2])
#pragma unroll
    for (int g = 0; g < G; g++) {
        int from = (g % 2) * 16 + lane % CH;
        qh[g].x = __shfl_sync(0xffffffffu, qv[g / 2].x, from);
        qh[g].y = __shfl_sync(0xffffffffu, qv[g / 2].y, from);
        qh[g].z = __shfl_sync(0xffffffffu, qv[g / 2].z, from);
        qh[g].w = __shfl_sync(0xffffffffu, qv[g / 2].w, from);
    }
    const size_t row0 = (size_t)bh * seq + split * (seq / splits) + warp * (seq / (4 * splits));
    const int trips = (int)((long long)seq * D / ((long long)splits * UNROLL * 1024));
    __half2 acc[G][4];
    float mx[G], wsum[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        mx[g] = -1e30f; wsum[g] = 0.f;
#pragma unroll
        for (int e = 0; e < 4; e++) acc[g][e] = __float2half2_rn(0.f);
    }
    for (int i = 0; i < trips; i++) {
        uint4 kr[UNROLL], vr[UNROLL];
#pragma unroll
        for (int rep = 0; rep < UNROLL; rep++) {
            size_t row = row0 + (size_t)(i * UNROLL + rep) * (256 / D) + lane / CH;
            kr[rep] = k_cache[row * CH + lane % CH];
            vr[rep] = v_cache[row * CH + lane % CH];
        }
#pragma unroll
        for (int rep = 0; rep < UNROLL; rep++) {
#pragma unroll
            for (int g = 0; g < G; g++) {
                __half2 dot = __hmul2(h2(kr[rep], 0), h2(qh[g], 0));
                dot = __hfma2(h2(kr[rep], 1), h2(qh[g], 1), dot);
                dot = __hfma2(h2(kr[rep], 2), h2(qh[g], 2), dot);
                dot = __hfma2(h2(kr[rep], 3), h2(qh[g], 3), dot);
                float s = __low2float(dot) + __high2float(dot);
#pragma unroll
                for (int off = CH / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
                float m_new = fmaxf(mx[g], s);
                float corr = twin_ex2(mx[g] - m_new), w = twin_ex2(s - m_new);
                wsum[g] = wsum[g] * corr + w;
                mx[g] = m_new;
                __half2 c2 = __float2half2_rn(corr), w2 = __float2half2_rn(w);
#pragma unroll
                for (int e = 0; e < 4; e++) acc[g][e] = __hfma2(h2(vr[rep], e), w2, __hmul2(acc[g][e], c2));
            }
        }
    }
    // the four warps' partial outputs meet in shared memory; warp 0 sums them and writes the block's
#pragma unroll
    for (int g = 0; g < G; g++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float2 f = __half22float2(acc[g][e]);
            combine[warp][g * D + (lane % CH) * 8 + e * 2] = f.x;
            combine[warp][g * D + (lane % CH) * 8 + e * 2 + 1] = f.y;
        }
    }
    __syncthreads();
    if (warp == 0) {
        float* out = partial + (size_t)blockIdx.x * (G * D + 2 * 32);
        for (int e = lane * 4; e < G * D; e += 128) {
            float4 s = *reinterpret_cast<float4*>(&combine[0][e]);
#pragma unroll
            for (int w = 1; w < 4; w++) {
                float4 t = *reinterpret_cast<float4*>(&combine[w][e]);
                s.x += t.x; s.y += t.y; s.z += t.z; s.w += t.w;
            }
            *reinterpret_cast<float4*>(out + e) = s;
        }
        float ws = wsum[0], m = mx[0];
#pragma unroll
        for (int g = 1; g < G; g++) if (lane % G == g) { ws = wsum[g]; m = mx[g]; }
        out[G * D + lane] = ws;
        out[G * D + 32 + lane] = m;
    }
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"batch", 4}, {"heads_q", 32}, {"heads_kv", 8}, {"d", 128}, {"seq", 2048}, {"splits", 16},
                              {"unroll", 4}, {"dtype_bytes", 2}});
    int heads_q = (int)p["heads_q"], heads_kv = (int)p["heads_kv"], seq = (int)p["seq"], splits = (int)p["splits"];
    if (p["d"] != D || heads_q != G * heads_kv || p["unroll"] != UNROLL || p["dtype_bytes"] != 2 ||
        ((long long)seq * D) % ((long long)splits * UNROLL * 1024)) {
        std::fprintf(stderr, "compiled for d=128, heads_q = 4 x heads_kv, unroll=4, FP16, seq * d a multiple of "
                             "splits * unroll * 1024\n");
        return 2;
    }
    long long batch = p["batch"];
    size_t cache = (size_t)batch * heads_kv * seq * D;  // halves
    uint4* q = twin_alloc<uint4>((size_t)batch * heads_q * D / 8);
    uint4 *k = twin_alloc<uint4>(cache / 8), *v = twin_alloc<uint4>(cache / 8);
    float* partial = twin_alloc<float>((size_t)batch * heads_kv * splits * (G * D + 64));
    dim3 grid((unsigned)(batch * heads_kv * splits)), block(128);
    auto ms = twin_time([&] { kv_decode<<<grid, block>>>(q, k, v, partial, heads_q, heads_kv, seq, splits); }, p.reps);
    twin_report("kv_decode", "workloads/kv_decode.yaml", p, grid, block, 0, ms);
    return 0;
}
