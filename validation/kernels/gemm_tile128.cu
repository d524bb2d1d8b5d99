// gemm_tile128 twin of workloads/gemm_tile128.yaml: FP16 GEMM C = A x B (A M x K, B K x N row-major, C FP32) as
// CUTLASS's Ampere kernel 128x128_32x4: a block of 4 warps (2 x 2) owns a 128 x 128 tile, each warp 64 x 64 in
// registers (32 m16n8 accumulators). Per K step of BK = 32 each thread copies four 16-byte chunks of the A tile and
// four of the B tile with cp.async.cg into one of STAGES XOR-swizzled shared-memory stages (STAGES - 1 tiles in
// flight); trip k waits for tile k (cp.async.wait_group STAGES - 2, barrier), then per 16-wide k slice loads the
// warp's A fragments (4 x ldmatrix.x4) and B fragments (4 x ldmatrix.x4.trans), issues a quarter of tile
// k + STAGES - 1's copies and 32 mma.sync m16n8k16. At the end each thread stores its 128 FP32 accumulators.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o gemm_tile128 gemm_tile128.cu
// Run:   ./gemm_tile128 [M=4096] [N=4096] [K=4096] [BK=32] [STAGES=4] [regs=232] [reps=20]   (BK must be 32)
#include "gemm_common.h"

template <int STAGES>
__global__ void __launch_bounds__(128) gemm_tile128(const __half_raw* __restrict__ A, const __half_raw* __restrict__ B,
                                                    float* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned sa = twin_smem(smem), sb = sa + STAGES * 8192;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, BK = 32, tiles = K / BK;
    const int by = blockIdx.y, bx = blockIdx.x;

    auto copy_a = [&](int tile, int idx) {  // chunk idx of tile's 128 x 32 A slice: row idx / 4, 16-byte chunk idx % 4
        int row = idx / 4, chunk = idx % 4;
        cp_async16(sa + (tile % STAGES) * 8192 + row * 64 + ((chunk ^ ((row / 2) % 4)) * 16),
                   A + ((size_t)(by * 128 + row) * K + tile * BK + chunk * 8));
    };
    auto copy_b = [&](int tile, int idx) {  // B slice 32 x 128: row idx / 16, chunk idx % 16
        int row = idx / 16, chunk = idx % 16;
        cp_async16(sb + (tile % STAGES) * 8192 + row * 256 + ((chunk ^ (row % 8)) * 16),
                   B + ((size_t)(tile * BK + row) * N + bx * 128 + chunk * 8));
    };

    for (int p = 0; p < STAGES - 1; p++) {  // prologue: tiles 0 .. STAGES - 2 in flight, a group each
#pragma unroll
        for (int rep = 0; rep < 4; rep++) copy_a(p, tid + 128 * rep);
#pragma unroll
        for (int rep = 0; rep < 4; rep++) copy_b(p, tid + 128 * rep);
        cp_async_commit();
    }
    float c[32][4] = {};
    unsigned fa[4][4], fb[4][4];
    for (int k = 0; k < tiles; k++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const unsigned stage_a = sa + (k % STAGES) * 8192, stage_b = sb + (k % STAGES) * 8192;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
#pragma unroll
            for (int rep = 0; rep < 4; rep++) {
                int row = (warp % 2) * 64 + rep * 16 + lane % 16;
                ldsm_x4(fa[rep], stage_a + row * 64 + (((kk * 2 + lane / 16) ^ ((row / 2) % 4)) * 16));
            }
#pragma unroll
            for (int rep = 0; rep < 4; rep++) {
                int row = kk * 16 + lane % 16;
                ldsm_x4_trans(fb[rep], stage_b + row * 256 + ((((warp / 2) * 8 + rep * 2 + lane / 16) ^ (row % 8)) * 16));
            }
            if (k + STAGES - 1 < tiles) {
#pragma unroll
                for (int rep = 0; rep < 2; rep++) copy_a(k + STAGES - 1, tid + 128 * (kk * 2 + rep));
#pragma unroll
                for (int rep = 0; rep < 2; rep++) copy_b(k + STAGES - 1, tid + 128 * (kk * 2 + rep));
            }
#pragma unroll
            for (int rep = 0; rep < 32; rep++) twin_mma16816(c[rep], fa[rep / 8], &fb[(rep % 8) / 2][(rep % 2) * 2]);
        }
        cp_async_commit();
    }
#pragma unroll
    for (int rep = 0; rep < 32; rep++) {  // 2 rows of 16 lanes x 16 bytes per instruction, as the YAML stores them
        size_t row = by * 128 + (warp % 2) * 64 + rep * 2 + lane / 16, col = bx * 128 + (warp / 2) * 64 + (lane % 16) * 4;
        *reinterpret_cast<float4*>(C + row * N + col) = make_float4(c[rep][0], c[rep][1], c[rep][2], c[rep][3]);
    }
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"BK", 32}, {"STAGES", 4}, {"regs", 232}});
    int M = (int)p["M"], N = (int)p["N"], K = (int)p["K"], stages = (int)p["STAGES"];
    if (p["BK"] != 32 || M % 128 || N % 128 || K % 32 || stages < 2 || stages > 5) {
        std::fprintf(stderr, "needs BK=32, M and N multiples of 128, K of 32, 2 <= STAGES <= 5\n");
        return 2;
    }
    __half_raw *A = twin_alloc<__half_raw>((size_t)M * K), *B = twin_alloc<__half_raw>((size_t)K * N);
    float* C = twin_alloc<float>((size_t)M * N);
    dim3 grid(N / 128, M / 128), block(128);
    size_t smem = (size_t)stages * 16384;
    auto launch = [&] {
        switch (stages) {
            case 2: gemm_tile128<2><<<grid, block, smem>>>(A, B, C, M, N, K); break;
            case 3: gemm_tile128<3><<<grid, block, smem>>>(A, B, C, M, N, K); break;
            case 5: gemm_tile128<5><<<grid, block, smem>>>(A, B, C, M, N, K); break;
            default: gemm_tile128<4><<<grid, block, smem>>>(A, B, C, M, N, K); break;
        }
    };
    TWIN_CHECK(cudaFuncSetAttribute(gemm_tile128<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 5 * 16384));
    TWIN_CHECK(cudaFuncSetAttribute(gemm_tile128<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 5 * 16384));
    TWIN_CHECK(cudaFuncSetAttribute(gemm_tile128<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 5 * 16384));
    TWIN_CHECK(cudaFuncSetAttribute(gemm_tile128<5>, cudaFuncAttributeMaxDynamicSharedMemorySize, 5 * 16384));
    auto ms = twin_time(launch, p.reps);
    twin_report("gemm_tile128", "workloads/gemm_tile128.yaml", p, grid, block, smem, ms);
    return 0;
}
