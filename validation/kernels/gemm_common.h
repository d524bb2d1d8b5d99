// cp.async and ldmatrix for the Ampere-style GEMM twins (gemm_tile128.cu, gemm_multistage.cu).
#pragma once
#include "twin.h"

// cp.async.cg: 16 bytes from global to shared memory, L1 bypassed (LDGSTS.E.BYPASS.128)
__device__ __forceinline__ void cp_async16(unsigned smem_addr, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem_addr), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

// ldmatrix.x4 (LDSM.16.M88.4) and its transposing form (LDSM.16.MT88.4): four 8x8 b16 matrices, a row address per lane
__device__ __forceinline__ void ldsm_x4(unsigned* r, unsigned smem_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned* r, unsigned smem_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr));
}
