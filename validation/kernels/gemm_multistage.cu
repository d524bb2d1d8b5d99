// gemm_multistage twin of workloads/gemm_multistage.yaml: FP16 GEMM, a 128 x 128 tile per block of 256 threads (8
// warps as 2 x 4, warp tile 64 x 32, 16 m16n8 accumulators), BK = 32, and the Ampere cp.async pipeline: each
// thread copies two 16-byte chunks of the A tile and two of the B tile with cp.async.cg into one of STAGES
// XOR-swizzled stages and commits each tile as a group. Trip k copies tile k + STAGES - 1, waits until tile k has
// landed (cp.async.wait_group STAGES - 1), barrier, loads its fragments with 16-byte shared loads (LDS.128, as the
// YAML does), 16 mma.sync m16n8k16 per 16-wide k slice, barrier. STAGES = 1 is the unpipelined kernel.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o gemm_multistage gemm_multistage.cu
// Run:   ./gemm_multistage [M=4096] [N=4096] [K=4096] [BK=32] [STAGES=3] [regs=128] [reps=20]   (BK must be 32)
#include "gemm_common.h"

template <int STAGES>
__global__ void __launch_bounds__(256) gemm_multistage(const __half_raw* __restrict__ A, const __half_raw* __restrict__ B,
                                                       float* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned sa = twin_smem(smem), sb = sa + STAGES * 8192;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, BK = 32, tiles = K / BK;
    const int by = blockIdx.y, bx = blockIdx.x;

    auto copy = [&](int tile) {
#pragma unroll
        for (int rep = 0; rep < 2; rep++) {
            int idx = tid + 256 * rep, row = idx / 4, chunk = idx % 4;
            cp_async16(sa + (tile % STAGES) * 8192 + row * 64 + ((chunk ^ ((row / 2) % 4)) * 16),
                       A + ((size_t)(by * 128 + row) * K + tile * BK + chunk * 8));
        }
#pragma unroll
        for (int rep = 0; rep < 2; rep++) {
            int idx = tid + 256 * rep, row = idx / 16, chunk = idx % 16;
            cp_async16(sb + (tile % STAGES) * 8192 + row * 256 + ((chunk ^ (row % 8)) * 16),
                       B + ((size_t)(tile * BK + row) * N + bx * 128 + chunk * 8));
        }
    };

    for (int p = 0; p < STAGES - 1; p++) {
        copy(p);
        cp_async_commit();
    }
    float c[16][4] = {};
    for (int k = 0; k < tiles; k++) {
        if (k + STAGES - 1 < tiles) copy(k + STAGES - 1);
        cp_async_commit();
        cp_async_wait<STAGES - 1>();  // tile k has landed; the STAGES - 1 newer groups may still be in flight
        __syncthreads();
        const unsigned stage_a = sa + (k % STAGES) * 8192, stage_b = sb + (k % STAGES) * 8192;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            uint4 fa[4], fb[2];
#pragma unroll
            for (int rep = 0; rep < 4; rep++) {
                int row = (warp % 2) * 64 + rep * 16 + lane % 16;
                fa[rep] = twin_lds128(stage_a + row * 64 + (((kk * 2 + lane / 16) ^ ((row / 2) % 4)) * 16));
            }
#pragma unroll
            for (int rep = 0; rep < 2; rep++) {
                int row = kk * 16 + lane % 16;
                fb[rep] = twin_lds128(stage_b + row * 256 + ((((warp / 2) * 4 + rep * 2 + lane / 16) ^ (row % 8)) * 16));
            }
#pragma unroll
            for (int rep = 0; rep < 16; rep++) {
                const uint4& b = fb[(rep % 4) / 2];
                unsigned bb[2] = {rep % 2 ? b.z : b.x, rep % 2 ? b.w : b.y};
                twin_mma16816(c[rep], reinterpret_cast<const unsigned*>(&fa[rep / 4]), bb);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int rep = 0; rep < 16; rep++) {  // 16 rows of 4 lanes x 16 bytes per instruction, as the YAML stores them
        size_t row = by * 128 + (warp % 2) * 64 + rep * 4 + lane / 8, col = bx * 128 + (warp / 2) * 32 + (lane % 8) * 4;
        *reinterpret_cast<float4*>(C + row * N + col) = make_float4(c[rep][0], c[rep][1], c[rep][2], c[rep][3]);
    }
}

int main(int argc, char** argv) {
    TwinParams p(argc, argv, {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"BK", 32}, {"STAGES", 3}, {"regs", 128}});
    int M = (int)p["M"], N = (int)p["N"], K = (int)p["K"], stages = (int)p["STAGES"];
    if (p["BK"] != 32 || M % 128 || N % 128 || K % 32 || stages < 1 || stages > 5) {
        std::fprintf(stderr, "needs BK=32, M and N multiples of 128, K of 32, 1 <= STAGES <= 5\n");
        return 2;
    }
    __half_raw *A = twin_alloc<__half_raw>((size_t)M * K), *B = twin_alloc<__half_raw>((size_t)K * N);
    float* C = twin_alloc<float>((size_t)M * N);
    dim3 grid(N / 128, M / 128), block(256);
    size_t smem = (size_t)stages * 16384;
    auto set = [](auto kernel) {
        TWIN_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 5 * 16384));
    };
    set(gemm_multistage<1>); set(gemm_multistage<2>); set(gemm_multistage<3>); set(gemm_multistage<4>);
    set(gemm_multistage<5>);
    auto launch = [&] {
        switch (stages) {
            case 1: gemm_multistage<1><<<grid, block, smem>>>(A, B, C, M, N, K); break;
            case 2: gemm_multistage<2><<<grid, block, smem>>>(A, B, C, M, N, K); break;
            case 4: gemm_multistage<4><<<grid, block, smem>>>(A, B, C, M, N, K); break;
            case 5: gemm_multistage<5><<<grid, block, smem>>>(A, B, C, M, N, K); break;
            default: gemm_multistage<3><<<grid, block, smem>>>(A, B, C, M, N, K); break;
        }
    };
    auto ms = twin_time(launch, p.reps);
    twin_report("gemm_multistage", "workloads/gemm_multistage.yaml", p, grid, block, smem, ms);
    return 0;
}
