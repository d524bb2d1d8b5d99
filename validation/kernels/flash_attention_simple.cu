// flash_attention_simple twin of workloads/flash_attention_simple.yaml: a simple FlashAttention-2-style forward pass.
// A block of 4 warps owns 64 query rows of one (batch, head), each warp 16 of them (its Q fragments in registers,
// d / 16 16-byte loads).
// Per 64-key tile the block stages K and V in shared memory (16-byte loads, XOR-swizzled 16-byte stores, barrier);
// each warp computes its 16 x 64 S tile with d / 2 mma.sync m16n8k16 from 16-byte shared loads of K, runs the
// online softmax in registers (row maximum by shuffles, exp2 on the SFU, the running sum, the rescale of O), packs
// P to FP16 and accumulates O += P V with d / 2 more mma.sync from V; at the end O / l is stored as FP16.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o flash_attention_simple flash_attention_simple.cu
// Run:   ./flash_attention_simple [batch=1] [heads=8] [seq=512] [d=64] [reps=20]   (d 64, 128 or 256; seq a multiple of 64)
#include "twin.h"

__device__ __forceinline__ unsigned pack_half2(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<unsigned*>(&h);
}

template <int D>
__global__ void __launch_bounds__(128) flash_attention(const uint4* __restrict__ Q, const uint4* __restrict__ K,
                                                       const uint4* __restrict__ V, uint4* __restrict__ O, int seq) {
    constexpr int CH = D / 8;  // 16-byte chunks per row
    extern __shared__ __align__(128) unsigned char tiles[];  // k_tile, then v_tile: 64 x d FP16 each
    unsigned char *k_tile = tiles, *v_tile = tiles + 64 * D * 2;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const size_t head = (size_t)blockIdx.y * seq;
    const unsigned sk = twin_smem(k_tile), sv = twin_smem(v_tile);
    auto swz = [](int row, int chunk) { return row * D * 2 + ((chunk ^ (row % 8)) * 16); };

    uint4 q[D / 16];
#pragma unroll
    for (int rep = 0; rep < D / 16; rep++) {
        int e = rep * 32 + lane;
        q[rep] = Q[(head + blockIdx.x * 64 + warp * 16 + e / CH) * CH + e % CH];
    }
    float o[D / 8][4] = {}, m = -1e30f, l = 0.f;
    for (int kt = 0; kt < seq / 64; kt++) {
        uint4 gk[D / 16], gv[D / 16];
#pragma unroll
        for (int rep = 0; rep < D / 16; rep++) {
            int e = tid + 128 * rep;
            gk[rep] = K[(head + kt * 64 + e / CH) * CH + e % CH];
            gv[rep] = V[(head + kt * 64 + e / CH) * CH + e % CH];
        }
#pragma unroll
        for (int rep = 0; rep < D / 16; rep++) {
            int e = tid + 128 * rep;
            twin_sts128(sk + swz(e / CH, e % CH), gk[rep]);
        }
#pragma unroll
        for (int rep = 0; rep < D / 16; rep++) {
            int e = tid + 128 * rep;
            twin_sts128(sv + swz(e / CH, e % CH), gv[rep]);
        }
        __syncthreads();
        // S = Q K^T: the warp's 16 x 64 tile, 8 accumulators of m16n8
        float s[8][4] = {};
#pragma unroll
        for (int r = 0; r < D / 4; r += 2) {
            uint4 k0 = twin_lds128(sk + swz((r * 32 + lane) / CH, (r * 32 + lane) % CH));
            uint4 k1 = twin_lds128(sk + swz(((r + 1) * 32 + lane) / CH, ((r + 1) * 32 + lane) % CH));
            unsigned kb[4][2] = {{k0.x, k0.y}, {k0.z, k0.w}, {k1.x, k1.y}, {k1.z, k1.w}};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int rep = r * 2 + j;  // mma index: s{rep / (D / 16)} += q{rep % (D / 16)} x k{rep / 2}
                twin_mma16816(s[rep / (D / 16)], reinterpret_cast<const unsigned*>(&q[rep % (D / 16)]), kb[j]);
            }
        }
        // online softmax over the tile
        float m_new = m;
#pragma unroll
        for (int j = 0; j < 8; j++) m_new = fmaxf(m_new, fmaxf(fmaxf(s[j][0], s[j][1]), fmaxf(s[j][2], s[j][3])));
        m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 1));
        m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 2));
        float corr = twin_ex2(m - m_new);
        unsigned p[16];
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[j][e] = twin_ex2(fmaf(s[j][e], 0.18033688f, -m_new));
                l += s[j][e];
            }
            p[2 * j] = pack_half2(s[j][0], s[j][1]);
            p[2 * j + 1] = pack_half2(s[j][2], s[j][3]);
        }
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) o[j][e] *= corr;
        }
        // O += P V: d / 8 n-tiles x 4 k-slices of 16 keys
#pragma unroll
        for (int r = 0; r < D / 4; r++) {
            uint4 v = twin_lds128(sv + swz((r * 32 + lane) / CH, (r * 32 + lane) % CH));
            unsigned vb[2][2] = {{v.x, v.y}, {v.z, v.w}};
#pragma unroll
            for (int j = 0; j < 2; j++) {
                int rep = r * 2 + j;  // o{rep / 4} += p{rep % 4} x v{rep / 2}
                twin_mma16816(o[rep / 4], &p[(rep % 4) * 4], vb[j]);
            }
        }
        m = m_new;
        __syncthreads();
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    float linv = 1.f / l;
#pragma unroll
    for (int rep = 0; rep < D / 16; rep++) {
        int e = rep * 32 + lane;
        uint4 h = make_uint4(pack_half2(o[2 * rep][0] * linv, o[2 * rep][1] * linv), pack_half2(o[2 * rep][2] * linv, o[2 * rep][3] * linv),
                             pack_half2(o[2 * rep + 1][0] * linv, o[2 * rep + 1][1] * linv),
                             pack_half2(o[2 * rep + 1][2] * linv, o[2 * rep + 1][3] * linv));
        O[(head + blockIdx.x * 64 + warp * 16 + e / CH) * CH + e % CH] = h;
    }
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"batch", 1}, {"heads", 8}, {"seq", 512}, {"d", 64}});
    int seq = (int)p["seq"], d = (int)p["d"];
    if (seq % 64 || (d != 64 && d != 128 && d != 256)) { std::fprintf(stderr, "needs seq a multiple of 64, d 64/128/256\n"); return 2; }
    size_t elems = (size_t)p["batch"] * p["heads"] * seq * d;
    uint4 *Q = twin_alloc<uint4>(elems / 8), *K = twin_alloc<uint4>(elems / 8), *V = twin_alloc<uint4>(elems / 8),
          *O = twin_alloc<uint4>(elems / 8);
    dim3 grid(seq / 64, (unsigned)(p["batch"] * p["heads"])), block(128);
    size_t smem = 2 * 64 * (size_t)d * 2;
    TWIN_CHECK(cudaFuncSetAttribute(flash_attention<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * 64 * 256 * 2));
    auto launch = [&] {
        if (d == 64) flash_attention<64><<<grid, block, smem>>>(Q, K, V, O, seq);
        else if (d == 128) flash_attention<128><<<grid, block, smem>>>(Q, K, V, O, seq);
        else flash_attention<256><<<grid, block, smem>>>(Q, K, V, O, seq);
    };
    auto ms = twin_time(launch, p.reps);
    twin_report("flash_attention_simple", "workloads/flash_attention_simple.yaml", p, grid, block, smem, ms);
    return 0;
}
