// gpusim validation microbenchmarks: measure on real hardware what gpusim's microbenchmark workloads model.
// One binary, one JSON object on stdout. Build: make -C validation (nvcc, sm_90 by default; ARCH=sm_90a adds the
// wgmma rows, ARCH=sm_80 builds for an A100). `gpusim calibrate` builds and runs it, and writes an arch file.
//
//   ffma_latency        dependent FFMA chain, one thread, cycles per instruction (clock64)
//   ffma_throughput     independent FFMAs on every SM: FLOP/clk/SM, TFLOPS, and the SM clock the run saw
//   hmma_latency        dependent mma.sync.m16n8k16 (FP16 in, FP32 accumulate), one warp
//   hmma_throughput     independent mma.sync on every SM: dense FP16 tensor FLOP/clk/SM and TFLOPS
//   pointer_chase       one thread, random cyclic chain of 128 B-strided words: cycles per hop at L1/L2/DRAM footprints
//   smem_stride         1024 threads on one SM, each warp loads word lane*stride: SM cycles per warp-load (= wavefronts)
//   stream              device-wide copy (read + write) and read-only bandwidth, GB/s
//   occupancy           resident blocks per SM measured with %smid counters vs cudaOccupancyMaxActiveBlocksPerMultiprocessor
//
// The rows below are each the marginal cost of a longer loop: the same kernel timed at n and 2n trips, the
// difference divided by n (launch, warm-up and drain cancel), as validation/compare.py simulates them.
//
//   smem_latency        one thread, dependent shared-memory loads (a cycle of absolute shared addresses)
//   const_latency       one thread, dependent constant-memory loads (LDC) over 1 KiB
//   tlb                 one thread, dependent .cg loads one 2 MiB page apart over 32 MiB .. 8 GiB, after a warm pass
//                       (every line in L2): cycles per hop by footprint; the rise is the TLB miss cost, its knee the reach
//   atomics             red.global.add from 1024 threads on every SM: one address (cycles per update) or one address
//                       per thread (updates per clock per SM)
//   bandwidth           bytes per clock: one SM's shared memory (ld.shared.v4), L1 (ld.global.ca.v4, 16 KiB warm) and
//                       L2 (ld.global.cg.v4 over 8 MiB, one block); the chip's L2 (every SM, 16 MiB); DRAM write GB/s
//   mma_sync            mma.sync throughput per precision: FP16, BF16 (m16n8k16), TF32 (m16n8k8), INT8 and FP8
//                       (m16n8k32, FP8 from sm_89) FLOP (INT8: operations) per clock per SM
//   wgmma               (sm_90a builds) wgmma.mma_async m64n128 throughput per precision: FP16, BF16, TF32, FP8, INT8,
//                       and the SM clock during the FP16 run
//   sustained clock     (sm_90a builds) the SM clock after seconds of FP16 wgmma on every SM, with zero and with random
//                       operands (the clock a power-limited part holds through a real GEMM's data)
//   sfu                 MUFU.EX2 (ex2.approx.ftz.f32): dependent latency and warp-instructions per clock per SM
//   f2fp                cvt.rn.f16x2.f32 (F2FP) warp-instructions per clock per SM, alone and alternating with ex2
//                       (whether the softmax's conversions share the SFU's pipe)
//   block_launch        empty blocks of 32 threads, one resident per SM (all the shared memory): cycles per block
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>
#include <string>
#include <type_traits>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
    std::printf("{\n%s\n}\n", json.c_str()); std::exit(1); } } while (0)

static std::string json;  // accumulated "key": value, pairs
static void emit(const char* key, const std::string& value) {
    json += (json.empty() ? "" : ",\n") + std::string("  \"") + key + "\": " + value;
}
static std::string num(double v) { char b[64]; std::snprintf(b, sizeof b, "%.6g", v); return b; }

// ---------------------------------------------------------------- FFMA
__global__ void ffma_latency(float* out, long long* cycles, int iters, float a, float b) {
    float x = threadIdx.x;
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 64; j++) asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x) : "f"(a), "f"(b));
    }
    long long t1 = clock64();
    out[threadIdx.x] = x;
    if (threadIdx.x == 0) cycles[0] = t1 - t0;
}

__global__ void ffma_throughput(float* out, long long* cycles, int iters, float a, float b) {
    float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x0) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x1) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x2) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x3) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x4) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x5) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x6) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x7) : "f"(a), "f"(b));
        }
    }
    long long t1 = clock64();
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// ---------------------------------------------------------------- HMMA (mma.sync m16n8k16, f16 x f16 -> f32)
#define MMA(d0, d1, d2, d3) asm volatile( \
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
    : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))

__global__ void hmma_latency(float* out, long long* cycles, int iters, unsigned seed) {
    unsigned a0 = seed, a1 = seed + 1, a2 = seed + 2, a3 = seed + 3, b0 = seed + 4, b1 = seed + 5;
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    __syncwarp();
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 16; j++) MMA(d0, d1, d2, d3);
    }
    long long t1 = clock64();
    out[threadIdx.x] = d0 + d1 + d2 + d3;
    if (threadIdx.x == 0) cycles[0] = t1 - t0;
}

__global__ void hmma_throughput(float* out, long long* cycles, int iters, unsigned seed) {
    unsigned a0 = seed, a1 = seed + 1, a2 = seed + 2, a3 = seed + 3, b0 = seed + 4, b1 = seed + 5;
    float c[4][4] = {};
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            MMA(c[0][0], c[0][1], c[0][2], c[0][3]);
            MMA(c[1][0], c[1][1], c[1][2], c[1][3]);
            MMA(c[2][0], c[2][1], c[2][2], c[2][3]);
            MMA(c[3][0], c[3][1], c[3][2], c[3][3]);
        }
    }
    long long t1 = clock64();
    float s = 0;
    for (int k = 0; k < 4; k++) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// ---------------------------------------------------------------- pointer chase
template <bool L1>
__global__ void chase(const unsigned* chain, long long* cycles, unsigned* sink, int warm, int hops) {
    unsigned p = 0;
    for (int i = 0; i < warm; i++) {
        if (L1) asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(p) : "l"(chain + p));
        else    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(p) : "l"(chain + p));
    }
    long long t0 = clock64();
    for (int i = 0; i < hops; i++) {
        if (L1) asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(p) : "l"(chain + p));
        else    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(p) : "l"(chain + p));
    }
    long long t1 = clock64();
    sink[0] = p;
    cycles[0] = t1 - t0;
}

// ---------------------------------------------------------------- shared-memory strides
__global__ void smem_stride(long long* cycles, unsigned* sink, int stride, int iters) {
    extern __shared__ unsigned sh[];
    for (int k = threadIdx.x; k < 32 * 33 + 64; k += blockDim.x) sh[k] = 0;
    __syncthreads();
    unsigned lane = threadIdx.x & 31;
    unsigned addr = (unsigned)__cvta_generic_to_shared(sh + lane * stride);
    unsigned v0 = 0, v1 = 0, v2 = 0, v3 = 0, t;
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
        asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(t) : "r"(addr)); v0 += t;
        asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(t) : "r"(addr)); v1 += t;
        asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(t) : "r"(addr)); v2 += t;
        asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(t) : "r"(addr)); v3 += t;
    }
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[0] = t1 - t0;
    sink[threadIdx.x] = v0 + v1 + v2 + v3;
}

// ---------------------------------------------------------------- stream
__global__ void copy_kernel(const float4* __restrict__ a, float4* __restrict__ b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) b[i] = a[i];
}
__global__ void read_kernel(const float4* __restrict__ a, float* out, size_t n) {
    float s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = a[i]; s += v.x + v.y + v.z + v.w;
    }
    if (s == 12345.f) out[0] = s;
}

// ---------------------------------------------------------------- occupancy (resident blocks per SM)
__device__ __forceinline__ unsigned smid() { unsigned r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }

template <int N>
__global__ void resident(int* live, int* peak, float* out, long long spin, int dyn_words) {
    extern __shared__ float dyn[];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; k++) acc[k] = threadIdx.x * (k + 1);
    unsigned sm = smid();
    if (threadIdx.x == 0) {
        int now = atomicAdd(&live[sm], 1) + 1;
        atomicMax(&peak[sm], now);
    }
    long long t0 = clock64();
    while (clock64() - t0 < spin) {
#pragma unroll
        for (int k = 0; k < N; k++) acc[k] = acc[k] * 0.999f + acc[(k + 1) % N];
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicSub(&live[sm], 1);
    float s = 0;
#pragma unroll
    for (int k = 0; k < N; k++) s += acc[k];
    if (dyn_words >= 32) {  // touch the dynamic allocation only when there is one
        dyn[threadIdx.x % 32] = s;
        __syncthreads();
        s += dyn[(threadIdx.x + 1) % 32];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int N>
static void occupancy_case(int sms, int threads, size_t smem, long long spin, std::string& rows) {
    auto kern = resident<N>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    cudaFuncAttributes attr;
    CK(cudaFuncGetAttributes(&attr, kern));
    int driver = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&driver, kern, threads, smem));
    int *live, *peak; float* out;
    int blocks = sms * 40;
    CK(cudaMalloc(&live, 4 * 1024)); CK(cudaMalloc(&peak, 4 * 1024));
    CK(cudaMalloc(&out, sizeof(float) * (size_t)blocks * threads));
    CK(cudaMemset(live, 0, 4 * 1024)); CK(cudaMemset(peak, 0, 4 * 1024));
    int measured = 0;
    if (driver > 0) {
        resident<N><<<blocks, threads, smem>>>(live, peak, out, spin, (int)(smem / 4));
        CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
        std::vector<int> h(1024);
        CK(cudaMemcpy(h.data(), peak, 4 * 1024, cudaMemcpyDeviceToHost));
        measured = *std::max_element(h.begin(), h.end());
    }
    char b[256];
    std::snprintf(b, sizeof b, "%s{\"threads\": %d, \"regs\": %d, \"static_smem\": %zu, \"dynamic_smem\": %zu, "
                  "\"spin_cycles\": %lld, \"driver_blocks_per_sm\": %d, \"measured_blocks_per_sm\": %d}", rows.empty() ? "" : ", ",
                  threads, attr.numRegs, attr.sharedSizeBytes, smem, spin, driver, measured);
    rows += b;
    CK(cudaFree(live)); CK(cudaFree(peak)); CK(cudaFree(out));
}

static float time_ms(cudaEvent_t a, cudaEvent_t b) { float ms; CK(cudaEventElapsedTime(&ms, a, b)); return ms; }

// ================================================================ marginal-cost rows (see the header)
#include "kernels/wgmma.h"

// ---------------------------------------------------------------- shared-memory and constant-cache latency
__global__ void smem_latency(long long* cycles, unsigned* sink, int hops) {
    __shared__ unsigned chain[256];
    unsigned base = (unsigned)__cvta_generic_to_shared(chain);
    for (int k = threadIdx.x; k < 256; k += blockDim.x) chain[k] = base + ((k + 37) % 256) * 4;  // one cycle
    __syncthreads();
    unsigned p = base;
    long long t0 = clock64();
    for (int i = 0; i < hops; i++) asm volatile("ld.volatile.shared.u32 %0, [%0];" : "+r"(p));
    long long t1 = clock64();
    sink[0] = p;
    cycles[0] = t1 - t0;
}

__constant__ unsigned const_chain[256];  // byte offsets of the next word: one cycle over 1 KiB

__global__ void const_latency(long long* cycles, unsigned* sink, int hops) {
    unsigned p = 0;
    long long t0 = clock64();
    for (int i = 0; i < hops; i++) p = *(const unsigned*)((const char*)const_chain + p);
    long long t1 = clock64();
    sink[0] = p;
    cycles[0] = t1 - t0;
}

// ---------------------------------------------------------------- TLB: one hop per 2 MiB page
__global__ void tlb_build(char* base, const unsigned* order, size_t pages, size_t stride) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < pages) *(char**)(base + order[i] * stride) = base + order[(i + 1) % pages] * stride;
}

__global__ void tlb_chase(char* start, long long* cycles, char** sink, int warm, int hops) {
    char* p = start;
    for (int i = 0; i < warm; i++) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));
    long long t0 = clock64();
    for (int i = 0; i < hops; i++) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));
    long long t1 = clock64();
    sink[0] = p;
    cycles[0] = t1 - t0;
}

// ---------------------------------------------------------------- atomics: red.global.add, then one returning atom
__global__ void atomic_rate(unsigned* x, long long* cycles, unsigned* sink, int iters, int spread) {
    unsigned* a = x + (spread ? blockIdx.x * (size_t)blockDim.x + threadIdx.x : 0);
    unsigned v = threadIdx.x & 7;
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) asm volatile("red.global.add.u32 [%0], %1;" :: "l"(a), "r"(v) : "memory");
    unsigned last;  // ordered after this thread's updates of the same address: the block ends when they are done
    asm volatile("atom.global.add.u32 %0, [%1], 0;" : "=r"(last) : "l"(a) : "memory");
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    if (last == 0xFFFFFFFFu) sink[0] = last;
}

// ---------------------------------------------------------------- bandwidth: shared, L1, L2 (bytes per clock)
__global__ void smem_bandwidth(long long* cycles, unsigned* sink, int iters) {
    __shared__ uint4 buf[4 * 32];
    if (threadIdx.x < 4 * 32) buf[threadIdx.x] = make_uint4(threadIdx.x, 1, 2, 3);
    __syncthreads();
    unsigned addr = (unsigned)__cvta_generic_to_shared(&buf[threadIdx.x & 31]);
    unsigned s = 0, a, b, c, d;
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int k = 0; k < 4; k++) {  // 4 independent 512-byte warp-loads, conflict-free (lane x 16 bytes)
            asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr + k * 512));
            s += a ^ b ^ c ^ d;
        }
    }
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    if (s == 0x12345u) sink[0] = s;
}

// Each thread loads 16 bytes a time, `per_trip` loads in flight, grid-strided over `words` uint4 from `base`
// (each block starting at its own offset); .ca (L1) or .cg (L2 only).
template <bool L1>
__global__ void load_bandwidth(const uint4* base, size_t words, long long* cycles, unsigned* sink, int iters) {
    size_t stride = (size_t)blockDim.x * 4, start = (blockIdx.x * 4099ull * blockDim.x) % words;
    size_t i = (start + threadIdx.x) % words;
    unsigned s = 0;
    uint4 v[4];
    __syncthreads();
    long long t0 = clock64();
    for (int t = 0; t < iters; t++) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const uint4* p = base + (i + k * blockDim.x) % words;
            if (L1) asm volatile("ld.global.ca.v4.u32 {%0, %1, %2, %3}, [%4];"
                                 : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w) : "l"(p));
            else    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                                 : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w) : "l"(p));
        }
#pragma unroll
        for (int k = 0; k < 4; k++) s += v[k].x ^ v[k].w;
        i = (i + stride) % words;
    }
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    if (s == 0x12345u) sink[0] = s;
}

__global__ void write_kernel(float4* __restrict__ b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b[i] = make_float4(1.f, 2.f, 3.f, 4.f);
}

// ---------------------------------------------------------------- mma.sync per precision (4 chains per warp)
enum MmaKind { MMA_F16, MMA_BF16, MMA_TF32, MMA_S8, MMA_E4M3 };

template <int KIND, class Acc>
__device__ __forceinline__ void mma_step(Acc* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                         unsigned b1) {
    if constexpr (KIND == MMA_F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if constexpr (KIND == MMA_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if constexpr (KIND == MMA_TF32)
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if constexpr (KIND == MMA_S8)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if constexpr (KIND == MMA_E4M3)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

template <int KIND>
__global__ void mma_throughput(float* out, long long* cycles, int iters, unsigned seed) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    if constexpr (KIND == MMA_E4M3) { if (threadIdx.x == 0) cycles[blockIdx.x] = -1; return; }  // no FP8 mma.sync before sm_89
#endif
    unsigned a0 = seed, a1 = seed + 1, a2 = seed + 2, a3 = seed + 3, b0 = seed + 4, b1 = seed + 5;
    using Acc = typename std::conditional<KIND == MMA_S8, int, float>::type;
    Acc c[4][4] = {};
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int k = 0; k < 4; k++) mma_step<KIND>(c[k], a0, a1, a2, a3, b0, b1);
        }
    }
    long long t1 = clock64();
    float s = 0;
    for (int k = 0; k < 4; k++) s += (float)(c[k][0] + c[k][1] + c[k][2] + c[k][3]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// Two FP16 values in [-1, 1) from a 32-bit hash of x (operands that toggle like a real GEMM's data)
__device__ __forceinline__ unsigned random_f16x2(unsigned x) {
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    __half lo = __float2half((float)(x & 0xffff) / 32768.0f - 1.0f), hi = __float2half((float)(x >> 16) / 32768.0f - 1.0f);
    return (unsigned)__half_as_ushort(lo) | ((unsigned)__half_as_ushort(hi) << 16);
}

// ---------------------------------------------------------------- wgmma per precision (sm_90a builds)
enum WgKind { WG_F16, WG_BF16, WG_TF32, WG_E4M3, WG_S8 };

// Two warpgroups per block, each 4 chained wgmma m64n128 per trip on its own accumulators, operands from shared memory.
template <int KIND>
__global__ void wgmma_throughput(float* out, long long* cycles, int iters, unsigned seed = 0) {
#if WGMMA_AVAILABLE
    // A and B operand tiles: zeros (only the rate counts), or with a seed FP16 values in [-1, 1) from a hash, whose
    // toggling multipliers draw the power a real GEMM's data does (the clock a power-limited part then holds)
    __shared__ __align__(1024) unsigned char tiles[2][8192];
    for (int k = threadIdx.x; k < 2 * 8192 / 4; k += blockDim.x)
        ((unsigned*)tiles)[k] = seed ? random_f16x2(seed ^ (blockIdx.x * 8192u + k)) : 0u;
    __syncthreads();
    unsigned long long da = wgmma_desc(tiles[0], 128, 256), db = wgmma_desc(tiles[1], 128, 256);
    using Acc = typename std::conditional<KIND == WG_S8, int, float>::type;
    Acc d[64];
#pragma unroll
    for (int k = 0; k < 64; k++) d[k] = 0;
    wgmma_fence();
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
        wgmma_fence();  // the accumulators of the group still in flight are the same registers (chained)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if constexpr (KIND == WG_F16) wgmma_m64n128k16_f16(d, da, db);
            if constexpr (KIND == WG_BF16) wgmma_m64n128k16_bf16(d, da, db);
            if constexpr (KIND == WG_TF32) wgmma_m64n128k8_tf32(d, da, db);
            if constexpr (KIND == WG_E4M3) wgmma_m64n128k32_e4m3(d, da, db);
            if constexpr (KIND == WG_S8) wgmma_m64n128k32_s8(d, da, db);
        }
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    long long t1 = clock64();
    float s = 0;
#pragma unroll
    for (int k = 0; k < 64; k++) s += (float)d[k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
#else
    if (threadIdx.x == 0) cycles[blockIdx.x] = -1;  // not an sm_90a build
    (void)out; (void)iters;
#endif
}

// ---------------------------------------------------------------- SFU: MUFU.EX2
__global__ void sfu_latency(float* out, long long* cycles, int iters, float x0) {
    float x = x0;
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 16; j++) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x));
    }
    long long t1 = clock64();
    out[threadIdx.x] = x;
    if (threadIdx.x == 0) cycles[0] = t1 - t0;
}

__global__ void sfu_throughput(float* out, long long* cycles, int iters, float x0) {
    float x[8];
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] = x0 + k * 1e-3f + threadIdx.x * 1e-6f;
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
#pragma unroll
            for (int k = 0; k < 8; k++) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[k]));
        }
    }
    long long t1 = clock64();
    float s = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) s += x[k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// ---------------------------------------------------------------- F2FP: FP32 pairs packed to FP16 (cvt.rn.f16x2.f32)
// The conversion FlashAttention's softmax issues once per two values of P. MIXED = false: 8 independent chains of
// conversions alone (warp-instructions per clock per SM); MIXED = true: each chain alternates an ex2 and a
// conversion, so a pair costs the sum of the two rates where they share a pipe and the slower one where they do not.
template <bool MIXED>
__global__ void f2fp_throughput(float* out, long long* cycles, int iters, float x0) {
    unsigned x[8];
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] = __float_as_uint(x0 + k * 1e-3f + threadIdx.x * 1e-6f);
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float f = __uint_as_float(x[k]);
                if (MIXED) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(f));
                asm volatile("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(x[k]) : "f"(f));
            }
        }
    }
    long long t1 = clock64();
    unsigned s = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) s ^= x[k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = __uint_as_float(s);
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// ---------------------------------------------------------------- block launch: empty blocks, one per SM at a time
__global__ void empty_block() {}

// ---------------------------------------------------------------- host side of the marginal rows
static double max_cycles(const long long* cyc, int blocks) {
    std::vector<long long> h(blocks);
    CK(cudaMemcpy(h.data(), cyc, sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
    return (double)*std::max_element(h.begin(), h.end());
}

static double mean_cycles(const long long* cyc, int blocks) {
    std::vector<long long> h(blocks);
    CK(cudaMemcpy(h.data(), cyc, sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
    double s = 0;
    for (long long v : h) s += (double)v;
    return s / blocks;
}

// The marginal cost of one more trip: run(n) and run(2n) after a warm-up run(n), (run(2n) - run(n)) / n.
template <class Run>
static double marginal(Run run, int n) {
    run(n);
    double a = run(n), b = run(2 * n);
    return (b - a) / n;
}


int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    emit("device", "\"" + std::string(prop.name) + "\"");
    emit("compute_capability", "\"" + std::to_string(prop.major) + "." + std::to_string(prop.minor) + "\"");
    emit("sms", std::to_string(sms));
    emit("reported_max_clock_mhz", num(clock_khz / 1000.0));
    emit("l2_bytes", std::to_string(prop.l2CacheSize));
    emit("shared_memory_per_sm", std::to_string(prop.sharedMemPerMultiprocessor));
    emit("shared_memory_per_block_optin", std::to_string(prop.sharedMemPerBlockOptin));
    emit("reserved_shared_memory_per_block", std::to_string(prop.reservedSharedMemPerBlock));
    emit("registers_per_sm", std::to_string(prop.regsPerMultiprocessor));
    emit("max_threads_per_sm", std::to_string(prop.maxThreadsPerMultiProcessor));
    emit("max_blocks_per_sm", std::to_string(prop.maxBlocksPerMultiProcessor));
    emit("global_memory_bytes", std::to_string(prop.totalGlobalMem));
    int mem_khz = 0, bus_bits = 0, driver = 0, runtime = 0;
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    emit("warp_size", std::to_string(prop.warpSize));
    emit("max_threads_per_block", std::to_string(prop.maxThreadsPerBlock));
    emit("registers_per_block", std::to_string(prop.regsPerBlock));
    emit("shared_memory_per_block", std::to_string(prop.sharedMemPerBlock));
    emit("memory_clock_mhz", num(mem_khz / 1000.0));
    emit("memory_bus_width_bits", std::to_string(bus_bits));
    emit("cuda_driver_version", std::to_string(driver));
    emit("cuda_runtime_version", std::to_string(runtime));

    float* fout; long long* cyc; unsigned* sink;
    CK(cudaMalloc(&fout, sizeof(float) * sms * 2048 * 4));
    CK(cudaMalloc(&cyc, sizeof(long long) * sms * 8));
    CK(cudaMalloc(&sink, sizeof(unsigned) * 1024));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    long long hc[4096];
    double sm_clock_mhz = clock_khz / 1000.0;

    // FFMA latency
    ffma_latency<<<1, 1>>>(fout, cyc, 1000, 1.0001f, 0.5f); CK(cudaDeviceSynchronize());
    ffma_latency<<<1, 1>>>(fout, cyc, 1000, 1.0001f, 0.5f); CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hc, cyc, sizeof(long long), cudaMemcpyDeviceToHost));
    emit("ffma_dependent_latency_cycles", num(hc[0] / (1000.0 * 64)));

    // FFMA throughput: 2 blocks x 1024 threads per SM (64 warps)
    {
        int iters = 4000, blocks = sms * 2, threads = 1024;
        ffma_throughput<<<blocks, threads>>>(fout, cyc, 10, 1.0001f, 0.5f); CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0));
        ffma_throughput<<<blocks, threads>>>(fout, cyc, iters, 1.0001f, 0.5f);
        CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        double ms = time_ms(e0, e1);
        CK(cudaMemcpy(hc, cyc, sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
        double cycles = *std::max_element(hc, hc + blocks);
        double ffma_per_sm = 2.0 * threads * iters * 16 * 8;  // two blocks per SM
        emit("ffma_flop_per_clock_per_sm", num(2 * ffma_per_sm / cycles));
        emit("ffma_warp_inst_per_clock_per_sm", num(ffma_per_sm / 32 / cycles));
        emit("ffma_tflops", num(2 * ffma_per_sm * sms / (ms * 1e-3) / 1e12));
        sm_clock_mhz = cycles / (ms * 1e-3) / 1e6;
        emit("sm_clock_mhz_during_ffma", num(sm_clock_mhz));
    }

    // HMMA latency and throughput
    {
        hmma_latency<<<1, 32>>>(fout, cyc, 200, 0x3c003c00u); CK(cudaDeviceSynchronize());
        hmma_latency<<<1, 32>>>(fout, cyc, 200, 0x3c003c00u); CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hc, cyc, sizeof(long long), cudaMemcpyDeviceToHost));
        emit("hmma_16816_f32_dependent_latency_cycles", num(hc[0] / (200.0 * 16)));
        int iters = 2000, blocks = sms * 2, threads = 512;
        hmma_throughput<<<blocks, threads>>>(fout, cyc, 10, 0x3c003c00u); CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0));
        hmma_throughput<<<blocks, threads>>>(fout, cyc, iters, 0x3c003c00u);
        CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        double ms = time_ms(e0, e1);
        CK(cudaMemcpy(hc, cyc, sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
        double cycles = *std::max_element(hc, hc + blocks);
        double mma_per_sm = 2.0 * (threads / 32) * iters * 8 * 4;
        emit("hmma_16816_flop_per_clock_per_sm", num(mma_per_sm * 4096 / cycles));
        emit("hmma_16816_tflops", num(mma_per_sm * 4096 * sms / (ms * 1e-3) / 1e12));
        emit("sm_clock_mhz_during_hmma", num(cycles / (ms * 1e-3) / 1e6));
    }

    // Pointer chase: a random cyclic permutation of 128 B-spaced words
    {
        std::string rows;
        struct Case { const char* level; size_t bytes; bool l1; int hops; };
        Case cases[] = {{"l1", 16 << 10, true, 20000}, {"l2", 8 << 20, false, 20000},
                        {"dram", size_t(512) << 20, false, 20000}, {"dram_4g", size_t(4) << 30, false, 10000}};
        for (const Case& c : cases) {
            size_t n = c.bytes / 128, words = c.bytes / 4;
            std::vector<unsigned> order(n);
            for (size_t i = 0; i < n; i++) order[i] = (unsigned)i;
            std::mt19937_64 rng(42);
            std::shuffle(order.begin() + 1, order.end(), rng);
            std::vector<unsigned> h(words, 0);
            for (size_t i = 0; i < n; i++) h[size_t(order[i]) * 32] = order[(i + 1) % n] * 32;
            unsigned* d; CK(cudaMalloc(&d, c.bytes));
            CK(cudaMemcpy(d, h.data(), c.bytes, cudaMemcpyHostToDevice));
            int warm = c.bytes <= (size_t(8) << 20) ? (int)n : 0;
            if (c.l1) chase<true><<<1, 1>>>(d, cyc, sink, warm, c.hops);
            else chase<false><<<1, 1>>>(d, cyc, sink, warm, c.hops);
            CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hc, cyc, sizeof(long long), cudaMemcpyDeviceToHost));
            char b[200];
            std::snprintf(b, sizeof b, "%s\"%s\": {\"footprint_bytes\": %zu, \"cycles_per_hop\": %.2f}",
                          rows.empty() ? "" : ", ", c.level, c.bytes, hc[0] / double(c.hops));
            rows += b;
            CK(cudaFree(d));
        }
        emit("pointer_chase", "{" + rows + "}");
    }

    // Shared-memory strides: SM cycles per warp-level load (1024 threads, 4 independent loads per iteration)
    {
        std::string rows;
        int strides[] = {1, 2, 3, 4, 8, 16, 32, 33};
        int iters = 2000, threads = 1024;
        for (int s : strides) {
            smem_stride<<<1, threads, (32 * 33 + 64) * 4>>>(cyc, sink, s, iters); CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hc, cyc, sizeof(long long), cudaMemcpyDeviceToHost));
            double warp_loads = (threads / 32.0) * iters * 4;
            char b[120];
            std::snprintf(b, sizeof b, "%s\"%d\": %.3f", rows.empty() ? "" : ", ", s, hc[0] / warp_loads);
            rows += b;
        }
        emit("smem_cycles_per_warp_load_by_stride", "{" + rows + "}");
    }

    // Stream bandwidth: 1 GiB arrays
    {
        size_t bytes = size_t(1) << 30, n = bytes / 16;
        float4 *a, *b; CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes));
        CK(cudaMemset(a, 0, bytes)); CK(cudaMemset(b, 0, bytes));
        int blocks = sms * 8, threads = 256;
        double best_copy = 1e30, best_read = 1e30;
        for (int r = 0; r < 5; r++) {
            CK(cudaEventRecord(e0)); copy_kernel<<<blocks, threads>>>(a, b, n); CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1)); best_copy = std::min(best_copy, (double)time_ms(e0, e1));
            CK(cudaEventRecord(e0)); read_kernel<<<blocks, threads>>>(a, fout, n); CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1)); best_read = std::min(best_read, (double)time_ms(e0, e1));
        }
        emit("stream_copy_gbs", num(2.0 * bytes / (best_copy * 1e-3) / 1e9));
        emit("stream_read_gbs", num(1.0 * bytes / (best_read * 1e-3) / 1e9));
        CK(cudaFree(a)); CK(cudaFree(b));
    }

    // Occupancy against registers and shared memory
    {
        std::string rows;
        for (long long spin : {20000LL, 400000LL}) {
        occupancy_case<8>(sms, 256, 0, spin, rows);
        occupancy_case<8>(sms, 256, 64 * 1024, spin, rows);
        occupancy_case<8>(sms, 128, 64 * 1024, spin, rows);
        occupancy_case<8>(sms, 512, 64 * 1024, spin, rows);
        occupancy_case<32>(sms, 256, 0, spin, rows);
        occupancy_case<64>(sms, 256, 0, spin, rows);
        occupancy_case<96>(sms, 256, 0, spin, rows);
        occupancy_case<96>(sms, 128, 20 * 1024, spin, rows);
        occupancy_case<160>(sms, 128, 0, spin, rows);
        occupancy_case<160>(sms, 1024, 0, spin, rows);
        }
        emit("occupancy", "[" + rows + "]");
    }

    // ================================================================ marginal-cost rows
    const double sm_mhz = sm_clock_mhz;  // the SM clock the FFMA run saw: converts event times to cycles
    auto sync1 = [&](int blocks) { CK(cudaGetLastError()); CK(cudaDeviceSynchronize()); return max_cycles(cyc, blocks); };

    // Latencies: shared memory and the constant cache (one thread, dependent loads)
    {
        emit("smem_latency_cycles", num(marginal([&](int n) { smem_latency<<<1, 1>>>(cyc, sink, n); return sync1(1); }, 4096)));
        std::vector<unsigned> cc(256);
        for (int k = 0; k < 256; k++) cc[k] = ((k + 37) % 256) * 4;
        CK(cudaMemcpyToSymbol(const_chain, cc.data(), sizeof(unsigned) * 256));
        emit("const_latency_cycles", num(marginal([&](int n) { const_latency<<<1, 1>>>(cyc, sink, n); return sync1(1); }, 4096)));
    }

    // TLB: one hop per 2 MiB page, every line in L2 after a warm pass; footprints 32 MiB to 8 GiB (what fits)
    {
        size_t free_b = 0, total_b = 0;
        CK(cudaMemGetInfo(&free_b, &total_b));
        const size_t stride = size_t(2) << 20;
        std::string rows;
        for (size_t fp = size_t(32) << 20; fp <= (size_t(8) << 30) && fp + (size_t(1) << 30) <= free_b; fp *= 2) {
            size_t pages = fp / stride;
            std::vector<unsigned> order(pages);
            for (size_t i = 0; i < pages; i++) order[i] = (unsigned)i;
            std::mt19937_64 rng(7);
            std::shuffle(order.begin() + 1, order.end(), rng);
            char* d; unsigned* dord;
            CK(cudaMalloc(&d, fp)); CK(cudaMalloc(&dord, sizeof(unsigned) * pages));
            CK(cudaMemcpy(dord, order.data(), sizeof(unsigned) * pages, cudaMemcpyHostToDevice));
            tlb_build<<<(unsigned)((pages + 255) / 256), 256>>>(d, dord, pages, stride);
            CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            int hops = (int)std::max<size_t>(2048, 2 * pages);
            double c = marginal([&](int n) { tlb_chase<<<1, 1>>>(d, cyc, (char**)sink, (int)pages, n); return sync1(1); }, hops);
            char b[160];
            std::snprintf(b, sizeof b, "%s{\"footprint_bytes\": %zu, \"cycles_per_hop\": %.2f}", rows.empty() ? "" : ", ", fp, c);
            rows += b;
            CK(cudaFree(d)); CK(cudaFree(dord));
        }
        emit("tlb", "{\"page_stride_bytes\": " + std::to_string(stride) + ", \"points\": [" + rows + "]}");
    }

    // Atomics: 1024 threads on every SM, red.global.add to one address or to one address per thread
    {
        unsigned* x;
        size_t n = (size_t)sms * 1024;
        CK(cudaMalloc(&x, n * sizeof(unsigned))); CK(cudaMemset(x, 0, n * sizeof(unsigned)));
        double updates = (double)sms * 1024;  // per trip
        double same = marginal([&](int it) { atomic_rate<<<sms, 1024>>>(x, cyc, sink, it, 0); return sync1(sms); }, 16);
        emit("atomic_same_address_cycles_per_update", num(same / updates));
        double spread = marginal([&](int it) { atomic_rate<<<sms, 1024>>>(x, cyc, sink, it, 1); return sync1(sms); }, 256);
        emit("atomic_spread_updates_per_clock_per_sm", num(updates / spread / sms));
        CK(cudaFree(x));
    }

    // Bandwidth per SM (shared, L1, L2) and for the chip (L2), bytes per SM clock; DRAM write GB/s
    {
        double per_trip = marginal([&](int it) {
            smem_bandwidth<<<sms, 1024>>>(cyc, sink, it); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            return mean_cycles(cyc, sms); }, 256);
        emit("smem_bytes_per_clock_per_sm", num(32.0 * 4 * 512 / per_trip));
        size_t l2_words = (size_t(16) << 20) / 16;
        uint4* buf; CK(cudaMalloc(&buf, l2_words * 16)); CK(cudaMemset(buf, 1, l2_words * 16));
        per_trip = marginal([&](int it) {
            load_bandwidth<true><<<sms, 1024>>>(buf, 1024, cyc, sink, it); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            return mean_cycles(cyc, sms); }, 256);  // 16 KiB: L1 hits after the first trip
        emit("l1_bytes_per_clock_per_sm", num(1024.0 * 4 * 16 / per_trip));
        per_trip = marginal([&](int it) { load_bandwidth<false><<<1, 1024>>>(buf, l2_words / 2, cyc, sink, it); return sync1(1); }, 256);
        emit("l2_bytes_per_clock_one_sm", num(1024.0 * 4 * 16 / per_trip));  // 8 MiB: one pass warms L2
        per_trip = marginal([&](int it) { load_bandwidth<false><<<2 * sms, 1024>>>(buf, l2_words, cyc, sink, it); return sync1(2 * sms); }, 128);
        emit("l2_bytes_per_clock", num(2.0 * sms * 1024 * 4 * 16 / per_trip));
        CK(cudaFree(buf));
        size_t bytes = size_t(1) << 30;
        float4* b; CK(cudaMalloc(&b, bytes));
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            CK(cudaEventRecord(e0)); write_kernel<<<sms * 8, 256>>>(b, bytes / 16); CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1)); best = std::min(best, (double)time_ms(e0, e1));
        }
        emit("stream_write_gbs", num(1.0 * bytes / (best * 1e-3) / 1e9));
        CK(cudaFree(b));
    }

    // mma.sync throughput per precision: 2 x 512 threads per SM, 4 chains per warp, 32 MMAs per warp per trip
    {
        std::string rows;
        auto row = [&](const char* name, double flop_per_mma, auto kernel) {
            bool ok = true;
            double per_trip = marginal([&](int it) {
                kernel<<<2 * sms, 512>>>(fout, cyc, it, 0x3c003c00u); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
                std::vector<long long> h(2 * sms);
                CK(cudaMemcpy(h.data(), cyc, sizeof(long long) * 2 * sms, cudaMemcpyDeviceToHost));
                if (h[0] < 0) ok = false;
                return (double)*std::max_element(h.begin(), h.end()); }, 500);
            if (!ok) return;
            char b[120];
            std::snprintf(b, sizeof b, "%s\"%s\": %.6g", rows.empty() ? "" : ", ", name, 2.0 * 16 * 32 * flop_per_mma / per_trip);
            rows += b;
        };
        row("fp16", 4096, mma_throughput<MMA_F16>);
        row("bf16", 4096, mma_throughput<MMA_BF16>);
        row("tf32", 2048, mma_throughput<MMA_TF32>);
        row("int8", 8192, mma_throughput<MMA_S8>);
        row("fp8", 8192, mma_throughput<MMA_E4M3>);
        emit("mma_sync_flop_per_clock_per_sm", "{" + rows + "}");
    }

    // wgmma throughput per precision (sm_90a builds): 2 blocks of 2 warpgroups per SM, 4 MMAs per warpgroup per trip
    {
        std::string rows;
        double clock_mhz = 0;
        auto row = [&](const char* name, double flop_per_mma, auto kernel) {
            bool ok = true;
            double per_trip = marginal([&](int it) {
                kernel<<<2 * sms, 256>>>(fout, cyc, it, 0u); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
                std::vector<long long> h(2 * sms);
                CK(cudaMemcpy(h.data(), cyc, sizeof(long long) * 2 * sms, cudaMemcpyDeviceToHost));
                if (h[0] < 0) ok = false;
                return (double)*std::max_element(h.begin(), h.end()); }, 256);
            if (!ok) return;
            if (clock_mhz == 0) {  // the SM clock while the tensor cores run flat out
                CK(cudaEventRecord(e0)); kernel<<<2 * sms, 256>>>(fout, cyc, 4096, 0u); CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                clock_mhz = max_cycles(cyc, 2 * sms) / (time_ms(e0, e1) * 1e-3) / 1e6;
            }
            char b[120];
            std::snprintf(b, sizeof b, "%s\"%s\": %.6g", rows.empty() ? "" : ", ", name, 2.0 * 2 * 4 * flop_per_mma / per_trip);
            rows += b;
        };
        row("fp16", 2.0 * 64 * 128 * 16, wgmma_throughput<WG_F16>);
        row("bf16", 2.0 * 64 * 128 * 16, wgmma_throughput<WG_BF16>);
        row("tf32", 2.0 * 64 * 128 * 8, wgmma_throughput<WG_TF32>);
        row("fp8", 2.0 * 64 * 128 * 32, wgmma_throughput<WG_E4M3>);
        row("int8", 2.0 * 64 * 128 * 32, wgmma_throughput<WG_S8>);
        if (!rows.empty()) {
            emit("wgmma_flop_per_clock_per_sm", "{" + rows + "}");
            emit("sm_clock_mhz_during_wgmma", num(clock_mhz));
        }
    }

    // The SM clock a power-limited part holds through a sustained tensor load (sm_90a builds): FP16 wgmma flat out on
    // every SM for WARM_S seconds (the power controller settles), then each of the next launches timed alone, the
    // median of their cycles / time; once with zero operands, once with random ones (a real GEMM's data toggles the
    // multipliers: more power, so a lower clock under the same limit)
    {
        const double WARM_S = 3.0;
        const int LAUNCHES = 50, ITERS = 4096;
        auto sustained = [&](unsigned seed) -> double {
            auto start = std::chrono::steady_clock::now();
            do {
                wgmma_throughput<WG_F16><<<2 * sms, 256>>>(fout, cyc, ITERS, seed);
                CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
                if (max_cycles(cyc, 2 * sms) < 0) return -1;
            } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < WARM_S);
            std::vector<double> mhz;
            for (int r = 0; r < LAUNCHES; r++) {
                CK(cudaEventRecord(e0));
                wgmma_throughput<WG_F16><<<2 * sms, 256>>>(fout, cyc, ITERS, seed);
                CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                mhz.push_back(max_cycles(cyc, 2 * sms) / (time_ms(e0, e1) * 1e-3) / 1e6);
            }
            std::sort(mhz.begin(), mhz.end());
            return mhz[mhz.size() / 2];
        };
        double zeros = sustained(0);
        if (zeros > 0) {
            double random = sustained(0x9e3779b9u);
            emit("sm_clock_mhz_sustained_wgmma_fp16",
                 "{\"zero_operands\": " + num(zeros) + ", \"random_operands\": " + num(random) +
                 ", \"warm_seconds\": " + num(WARM_S) + "}");
        }
    }

    // SFU: MUFU.EX2 dependent latency (one thread) and throughput (2 x 1024 threads per SM, 8 chains)
    {
        double per_trip = marginal([&](int it) { sfu_latency<<<1, 1>>>(fout, cyc, it, 0.5f); return sync1(1); }, 256);
        emit("sfu_ex2_dependent_latency_cycles", num(per_trip / 16));
        per_trip = marginal([&](int it) { sfu_throughput<<<2 * sms, 1024>>>(fout, cyc, it, 0.5f); return sync1(2 * sms); }, 256);
        emit("sfu_ex2_warp_inst_per_clock_per_sm", num(2.0 * 32 * 4 * 8 / per_trip));
    }

    // F2FP: cvt.rn.f16x2.f32 alone, and alternating with ex2 (2 x 1024 threads per SM, 8 chains)
    {
        double per_trip = marginal([&](int it) { f2fp_throughput<false><<<2 * sms, 1024>>>(fout, cyc, it, 0.5f); return sync1(2 * sms); }, 256);
        emit("f2fp_warp_inst_per_clock_per_sm", num(2.0 * 32 * 4 * 8 / per_trip));
        per_trip = marginal([&](int it) { f2fp_throughput<true><<<2 * sms, 1024>>>(fout, cyc, it, 0.5f); return sync1(2 * sms); }, 256);
        emit("f2fp_with_ex2_pairs_per_clock_per_sm", num(2.0 * 32 * 4 * 8 / per_trip));
    }

    // Block launch: empty 32-thread blocks holding all of an SM's shared memory (one resident per SM), 64 vs 128 per SM
    {
        int optin = (int)prop.sharedMemPerBlockOptin;
        CK(cudaFuncSetAttribute(empty_block, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
        auto run = [&](int per_sm) {
            double best = 1e30;
            for (int r = 0; r < 5; r++) {
                CK(cudaEventRecord(e0)); empty_block<<<sms * per_sm, 32, optin>>>(); CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1)); best = std::min(best, (double)time_ms(e0, e1));
            }
            return best * 1e-3 * sm_mhz * 1e6;  // cycles
        };
        double per_block = marginal(run, 64);
        emit("block_launch_cycles", num(per_block));
        emit("block_launch_ns", num(per_block / sm_mhz * 1e3));
    }

    std::printf("{\n%s\n}\n", json.c_str());
    return 0;
}
