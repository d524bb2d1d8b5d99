// flash_attention twin of workloads/flash_attention.yaml: the FlashAttention-2 library's forward kernel as the YAML
// writes it. A block of WARPS warps owns BM query rows of one (batch, head), each warp BM / WARPS of them; Q, one K
// tile and one V tile (BN keys each) live in shared memory, written by cp.async.cg (XOR-swizzled 16-byte chunks).
// Per key tile: wait for K, start V's copy, S = Q K^T from ldmatrix fragments (Q's again every tile), wait for V and
// start the next K's copy, the online softmax one instruction per value, O += P V with V by ldmatrix.trans; at the
// end O / l is stored as FP16. The library's tiles (d BM BN WARPS): 64 128 128 4, 128 128 64 4, 128 128 32 4
// (8.6 / 8.9), 256 64 64 4, 256 128 64 8; other shapes are refused.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o flash_attention flash_attention.cu
// Run:   ./flash_attention [batch=1] [heads=8] [seq=512] [d=64] [BM=128] [BN=128] [WARPS=4] [reps=20]
#include "twin.h"
#include "gemm_common.h"

__device__ __forceinline__ unsigned fa2_pack(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<unsigned*>(&h);
}

template <int D, int BM, int BN, int W>
__global__ void __launch_bounds__(32 * W) flash_attention(const uint4* __restrict__ Q, const uint4* __restrict__ K,
                                                          const uint4* __restrict__ V, uint4* __restrict__ O, int seq) {
    constexpr int CH = D / 8, THREADS = 32 * W, MT = BM / (16 * W), NT = BN / 8, OT = D / 8;
    extern __shared__ __align__(128) unsigned char tiles[];  // q_tile (BM x d), k_tile, v_tile (BN x d), FP16
    const unsigned sq = (unsigned)__cvta_generic_to_shared(tiles), sk = sq + BM * D * 2, sv = sk + BN * D * 2;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const size_t head = (size_t)blockIdx.y * seq, q0 = (size_t)blockIdx.x * BM;
    auto swz = [](int row, int chunk) { return (unsigned)(row * D * 2 + ((chunk ^ (row % 8)) * 16)); };

    // prologue: Q's tile and K's first tile, one commit group
#pragma unroll
    for (int rep = 0; rep < BM * D / (256 * W); rep++) {
        int e = tid + THREADS * rep;
        cp_async16(sq + swz(e / CH, e % CH), Q + (head + q0 + e / CH) * CH + e % CH);
    }
#pragma unroll
    for (int rep = 0; rep < BN * D / (256 * W); rep++) {
        int e = tid + THREADS * rep;
        cp_async16(sk + swz(e / CH, e % CH), K + (head + e / CH) * CH + e % CH);
    }
    cp_async_commit();

    float o[MT * OT][4] = {}, m[2 * MT], mo[2 * MT], l[2 * MT] = {};
#pragma unroll
    for (int r = 0; r < 2 * MT; r++) m[r] = mo[r] = -1e30f;
    const int tiles_n = seq / BN;
    for (int kt = 0; kt < tiles_n; kt++) {
        cp_async_wait<0>();
        __syncthreads();  // K tile kt is in; every warp is done with V tile kt - 1
#pragma unroll
        for (int rep = 0; rep < BN * D / (256 * W); rep++) {
            int e = tid + THREADS * rep;
            cp_async16(sv + swz(e / CH, e % CH), V + (head + (size_t)kt * BN + e / CH) * CH + e % CH);
        }
        cp_async_commit();
        // S = Q K^T: per 16 of d, MT Q fragments and BN / 16 K fragments, then MT x NT mma.sync
        float s[MT * NT][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            unsigned fq[MT][4], fk[BN / 16][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                int row = warp * (BM / W) + mt * 16 + lane % 16;
                ldsm_x4(fq[mt], sq + swz(row, kk * 2 + lane / 16));
            }
#pragma unroll
            for (int n16 = 0; n16 < BN / 16; n16++)
                ldsm_x4(fk[n16], sk + swz(n16 * 16 + lane % 16, kk * 2 + lane / 16));
#pragma unroll
            for (int rep = 0; rep < MT * NT; rep++) {
                int mt = rep / NT, nt = rep % NT;
                unsigned b[2] = {fk[nt / 2][nt % 2], fk[nt / 2][2 + nt % 2]};
                twin_mma16816(s[rep], fq[mt], b);
            }
        }
        cp_async_wait<0>();
        __syncthreads();  // V tile kt is in; every warp has read K tile kt
        if (kt + 1 < tiles_n) {
#pragma unroll
            for (int rep = 0; rep < BN * D / (256 * W); rep++) {
                int e = tid + THREADS * rep;
                cp_async16(sk + swz(e / CH, e % CH), K + (head + (size_t)(kt + 1) * BN + e / CH) * CH + e % CH);
            }
        }
        cp_async_commit();
        // online softmax: row r of this thread is m-tile r / 2, half r % 2 (values 0, 1 or 2, 3 of each accumulator)
#pragma unroll
        for (int rep = 0; rep < MT * NT * 4; rep++) {
            int r = (rep / (NT * 4)) * 2 + (rep % 4) / 2;
            m[r] = fmaxf(m[r], s[rep / 4][rep % 4]);
        }
#pragma unroll
        for (int r = 0; r < 2 * MT; r++) {
            m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 1));
            m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 2));
        }
        float corr[2 * MT];
#pragma unroll
        for (int r = 0; r < 2 * MT; r++) corr[r] = twin_ex2(mo[r] - m[r]);
#pragma unroll
        for (int rep = 0; rep < MT * NT * 4; rep++) {
            int r = (rep / (NT * 4)) * 2 + (rep % 4) / 2;
            s[rep / 4][rep % 4] = twin_ex2(fmaf(s[rep / 4][rep % 4], 0.18033688f, -m[r]));
        }
#pragma unroll
        for (int r = 0; r < 2 * MT; r++) l[r] *= corr[r];
#pragma unroll
        for (int rep = 0; rep < MT * NT * 4; rep++) {
            int r = (rep / (NT * 4)) * 2 + (rep % 4) / 2;
            l[r] += s[rep / 4][rep % 4];
        }
#pragma unroll
        for (int rep = 0; rep < MT * OT * 4; rep++) {
            int r = (rep / (OT * 4)) * 2 + (rep % 4) / 2;
            o[rep / 4][rep % 4] *= corr[r];
        }
#pragma unroll
        for (int r = 0; r < 2 * MT; r++) mo[r] = m[r];
        unsigned p[MT * NT * 2];  // P as FP16 pairs: the A fragments of P V (k = 16 keys: two S n-tiles)
#pragma unroll
        for (int j = 0; j < MT * NT; j++) {
            p[2 * j] = fa2_pack(s[j][0], s[j][1]);
            p[2 * j + 1] = fa2_pack(s[j][2], s[j][3]);
        }
        // O += P V: per 16 keys, d / 16 V fragments (ldmatrix.trans), MT x d / 8 mma.sync
#pragma unroll
        for (int kv = 0; kv < BN / 16; kv++) {
            unsigned fv[D / 16][4];
#pragma unroll
            for (int c = 0; c < D / 16; c++) ldsm_x4_trans(fv[c], sv + swz(kv * 16 + lane % 16, c * 2 + lane / 16));
#pragma unroll
            for (int rep = 0; rep < MT * OT; rep++) {
                int mt = rep / OT, nt = rep % OT;
                const unsigned* s0 = &p[(mt * NT + 2 * kv) * 2];  // S n-tiles 2 kv, 2 kv + 1 of m-tile mt
                unsigned a[4] = {s0[0], s0[1], s0[2], s0[3]};
                unsigned b[2] = {fv[nt / 2][2 * (nt % 2)], fv[nt / 2][2 * (nt % 2) + 1]};
                twin_mma16816(o[rep], a, b);
            }
        }
    }
    // epilogue: row sums across the quad, 1 / sum, O scaled and packed, the warp's BM / WARPS x d tile stored
#pragma unroll
    for (int r = 0; r < 2 * MT; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        l[r] = 1.f / l[r];
    }
#pragma unroll
    for (int rep = 0; rep < MT * OT * 4; rep++) {
        int r = (rep / (OT * 4)) * 2 + (rep % 4) / 2;
        o[rep / 4][rep % 4] *= l[r];
    }
#pragma unroll
    for (int rep = 0; rep < BM * D / (256 * W); rep++) {
        int e = rep * 32 + lane, j = (4 * rep) % (MT * OT);  // a permutation of the warp's values
        uint4 h = make_uint4(fa2_pack(o[j][0], o[j][1]), fa2_pack(o[j][2], o[j][3]),
                             fa2_pack(o[(j + 1) % (MT * OT)][0], o[(j + 1) % (MT * OT)][1]),
                             fa2_pack(o[(j + 1) % (MT * OT)][2], o[(j + 1) % (MT * OT)][3]));
        O[(head + q0 + warp * (BM / W) + e / CH) * CH + e % CH] = h;
    }
}

template <int D, int BM, int BN, int W>
static bool launch_if(int d, int bm, int bn, int w, dim3 grid, size_t smem, const uint4* Q, const uint4* K,
                      const uint4* V, uint4* O, int seq) {
    if (d != D || bm != BM || bn != BN || w != W) return false;
    static bool set = false;
    if (!set) {
        TWIN_CHECK(cudaFuncSetAttribute(flash_attention<D, BM, BN, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
        set = true;
    }
    flash_attention<D, BM, BN, W><<<grid, dim3(32 * W), smem>>>(Q, K, V, O, seq);
    return true;
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"batch", 1}, {"heads", 8}, {"seq", 512}, {"d", 64}, {"BM", 128}, {"BN", 128},
                              {"WARPS", 4}});
    int seq = (int)p["seq"], d = (int)p["d"], bm = (int)p["BM"], bn = (int)p["BN"], w = (int)p["WARPS"];
    if (seq % bm || seq % bn) { std::fprintf(stderr, "needs seq a multiple of BM and BN\n"); return 2; }
    size_t elems = (size_t)p["batch"] * p["heads"] * seq * d;
    uint4 *Q = twin_alloc<uint4>(elems / 8), *K = twin_alloc<uint4>(elems / 8), *V = twin_alloc<uint4>(elems / 8),
          *O = twin_alloc<uint4>(elems / 8);
    dim3 grid(seq / bm, (unsigned)(p["batch"] * p["heads"])), block(32 * w);
    size_t smem = (size_t)(bm + 2 * bn) * d * 2;
    auto launch = [&] {
        bool ok = launch_if<64, 128, 128, 4>(d, bm, bn, w, grid, smem, Q, K, V, O, seq) ||
                  launch_if<128, 128, 64, 4>(d, bm, bn, w, grid, smem, Q, K, V, O, seq) ||
                  launch_if<128, 128, 32, 4>(d, bm, bn, w, grid, smem, Q, K, V, O, seq) ||
                  launch_if<256, 64, 64, 4>(d, bm, bn, w, grid, smem, Q, K, V, O, seq) ||
                  launch_if<256, 128, 64, 8>(d, bm, bn, w, grid, smem, Q, K, V, O, seq);
        if (!ok) {
            std::fprintf(stderr, "d=%d BM=%d BN=%d WARPS=%d: not one of the library's tiles this twin builds\n", d, bm,
                         bn, w);
            std::exit(2);
        }
    };
    auto ms = twin_time(launch, p.reps);
    twin_report("flash_attention", "workloads/flash_attention.yaml", p, grid, block, smem, ms);
    return 0;
}
