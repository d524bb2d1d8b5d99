// gemm_hopper_ws twin of workloads/gemm_hopper_ws.yaml (compute capability 9.0a: nvcc -arch=sm_90a): FP16 GEMM
// C = A x B (A M x K, B K x N row-major, C FP32) as CUTLASS's warp-specialised Hopper kernels: a 128 x 256 tile per
// block of 384 threads, clusters of 2 blocks (one above the other) sharing the B slice by TMA multicast.
//   * warp 0 (the producer): for each BK = 64 slice of K, into stage k % STAGES once the consumers of both blocks
//     have freed it: arrive on the stage's `full` mbarrier expecting 48 KiB, TMA-load the 128 x 64 A tile, and
//     TMA-multicast its half of the 64 x 256 B slice (32 rows, 4 boxes of 64 columns) into both blocks;
//   * warps 1-3 leave at once (CUTLASS gives their registers to the consumers);
//   * warps 4-11, two consumer warpgroups of 64 rows each: wait on `full`, four wgmma m64n256k16 (FP32 accumulators,
//     operands from 128-byte-swizzled shared memory), commit, wait until the previous stage's MMAs are done, and
//     release that stage in both blocks (mbarrier arrivals, one on the peer's `empty` through the cluster);
//   * cluster barriers after the mbarriers' initialisation and before exit. The epilogue stores the 128 accumulators
//     of each thread as the YAML does (32 16-byte stores), not in the wgmma fragment order.
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o gemm_hopper_ws gemm_hopper_ws.cu
// Run:   ./gemm_hopper_ws [M=4096] [N=4096] [K=4096] [BK=64] [STAGES=4] [regs=168] [reps=20]   (BK must be 64)
#include "twin.h"
#include "wgmma.h"
#include <cudaTypedefs.h>

constexpr int BM = 128, BN = 256, BK = 64;
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2, STAGE_BYTES = A_BYTES + B_BYTES;  // 16 + 32 KiB

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {  // on block `rank`'s mbarrier
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}" :: "r"(bar), "r"(rank) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n}" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_multicast(unsigned dst, const CUtensorMap* map, int c0, int c1, unsigned bar,
                                              unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
}

template <int STAGES>
__global__ void __cluster_dims__(1, 2, 1) __launch_bounds__(384, 1)
gemm_hopper_ws(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, float* C, int N,
               int K) {
#if WGMMA_AVAILABLE
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // the stages 1024-byte aligned (a 128-byte swizzle repeats every 8 rows of 128 bytes)
    unsigned char* smem = smem_raw + ((1024 - (twin_smem(smem_raw) & 1023)) & 1023);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tiles = K / BK;
    const unsigned base = twin_smem(smem), bars = base + STAGES * STAGE_BYTES;  // full[s] at bars + 8s, empty[s] after
    auto full = [&](int s) { return bars + 8 * s; };
    auto empty = [&](int s) { return bars + 8 * (STAGES + s); };
    const unsigned rank = cluster_rank();  // 0 or 1: the block's half of B, = blockIdx.y % 2
    if (warp >= 1 && warp < 4) return;     // the producer warpgroup keeps one warp
    if (warp == 0 && lane == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), 16);  // 8 consumer warps in each of the cluster's 2 blocks
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_arrive();  // every block's mbarriers exist before a peer multicasts into it or arrives on them
    cluster_wait();
    if (warp == 0) {
        if (lane == 0) {
            for (int k = 0; k < tiles; k++) {
                int s = k % STAGES;
                if (k >= STAGES) mbar_wait(empty(s), ((k / STAGES) - 1) & 1);
                mbar_expect_tx(full(s), STAGE_BYTES);
                unsigned stage = base + s * STAGE_BYTES;
                tma_load(stage, &map_a, k * BK, blockIdx.y * BM, full(s));
                for (int j = 0; j < BN / 64; j++)  // this block's 32 rows of B, in both blocks' stages
                    tma_multicast(stage + A_BYTES + rank * (B_BYTES / 2) + j * 4096, &map_b, blockIdx.x * BN + j * 64,
                                  k * BK + rank * (BK / 2), full(s), 0x3);
            }
        }
        __syncwarp();
        cluster_arrive();
    } else {
        const int g = warp / 4 - 1;  // consumer warpgroup: rows 64 g of the tile
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; i++) acc[i] = 0.f;
        auto mma_stage = [&](int s) {
            unsigned stage = base + s * STAGE_BYTES;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                // A: K-major, 128-byte swizzle (8 rows of 128 B a group): 32 bytes per k step of 16
                unsigned long long da = wgmma_desc(smem + (stage - base) + g * 64 * 128 + kk * 32, 16, 1024, 1);
                // B: N-major, 128-byte swizzle: 64-column boxes 4 KiB apart, 8 k rows of 128 B a group
                int krow = kk * 16;
                unsigned long long db = wgmma_desc(smem + (stage - base) + A_BYTES + (krow / 32) * (B_BYTES / 2)
                                                   + (krow % 32) * 128, 4096, 1024, 1);
                wgmma_m64n256k16_f16_tb(acc, da, db);
            }
            wgmma_commit();
        };
        mbar_wait(full(0), 0);
        mma_stage(0);
        for (int k = 0; k < tiles - 1; k++) {
            mbar_wait(full((k + 1) % STAGES), ((k + 1) / STAGES) & 1);
            mma_stage((k + 1) % STAGES);
            wgmma_wait<1>();  // the previous stage's MMAs are done: release it in both blocks
            if (lane == 0) {
                mbar_arrive(empty(k % STAGES));
                mbar_arrive_cluster(empty(k % STAGES), rank ^ 1);
            }
        }
        wgmma_wait<0>();
        cluster_arrive();
#pragma unroll
        for (int rep = 0; rep < 32; rep++) {  // 16 x 256 FP32 rows per warp, half a row per store
            size_t row = blockIdx.y * BM + g * 64 + (warp % 4) * 16 + rep / 2;
            size_t col = blockIdx.x * BN + (rep % 2) * 128 + lane * 4;
            *reinterpret_cast<float4*>(C + row * N + col) = make_float4(acc[4 * rep], acc[4 * rep + 1], acc[4 * rep + 2], acc[4 * rep + 3]);
        }
    }
    cluster_wait();  // no peer still reaches this block's shared memory or mbarriers
#else
    (void)map_a; (void)map_b; (void)C; (void)N; (void)K;
#endif
}

static CUtensorMap tensor_map(PFN_cuTensorMapEncodeTiled_v12000 encode, void* base, unsigned long long rows,
                              unsigned long long cols, unsigned box_cols, unsigned box_rows) {
    CUtensorMap map;
    cuuint64_t dims[2] = {cols, rows}, strides[1] = {cols * 2};
    cuuint32_t box[2] = {box_cols, box_rows}, elem[2] = {1, 1};
    CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, dims, strides, box, elem,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d)\n", (int)r); std::exit(1); }
    return map;
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"BK", 64}, {"STAGES", 4}, {"regs", 168}});
    int M = (int)p["M"], N = (int)p["N"], K = (int)p["K"], stages = (int)p["STAGES"];
    if (p["BK"] != BK || M % (2 * BM) || N % BN || K % BK || stages < 2 || stages > 4) {
        std::fprintf(stderr, "needs BK=64, M a multiple of 256, N of 256, K of 64, 2 <= STAGES <= 4\n");
        return 2;
    }
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    TWIN_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (!fn || found != cudaDriverEntryPointSuccess) { std::fprintf(stderr, "no cuTensorMapEncodeTiled in the driver\n"); return 1; }
    auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    __half_raw *A = twin_alloc<__half_raw>((size_t)M * K), *B = twin_alloc<__half_raw>((size_t)K * N);
    float* C = twin_alloc<float>((size_t)M * N);
    CUtensorMap map_a = tensor_map(encode, A, M, K, BK, BM);       // 64 x 128 boxes of A (K innermost)
    CUtensorMap map_b = tensor_map(encode, B, K, N, 64, BK / 2);   // 64 x 32 boxes of B (N innermost)
    dim3 grid(N / BN, M / BM), block(384);
    size_t smem = 1024 + (size_t)stages * STAGE_BYTES + 2 * stages * 8;
    auto set = [&](auto kernel) {
        TWIN_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(1024 + 4 * STAGE_BYTES + 64)));
    };
    set(gemm_hopper_ws<2>); set(gemm_hopper_ws<3>); set(gemm_hopper_ws<4>);
    auto launch = [&] {
        if (stages == 2) gemm_hopper_ws<2><<<grid, block, smem>>>(map_a, map_b, C, N, K);
        else if (stages == 3) gemm_hopper_ws<3><<<grid, block, smem>>>(map_a, map_b, C, N, K);
        else gemm_hopper_ws<4><<<grid, block, smem>>>(map_a, map_b, C, N, K);
    };
    auto ms = twin_time(launch, p.reps);
    twin_report("gemm_hopper_ws", "workloads/gemm_hopper_ws.yaml", p, grid, block, smem, ms);
    return 0;
}
