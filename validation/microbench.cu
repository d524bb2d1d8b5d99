// gpusim validation microbenchmarks: measure on real hardware what gpusim's microbenchmark workloads model.
// One binary, one JSON object on stdout. Build: make -C validation (nvcc, sm_90 by default).
//
//   ffma_latency        dependent FFMA chain, one thread, cycles per instruction (clock64)
//   ffma_throughput     independent FFMAs on every SM: FLOP/clk/SM, TFLOPS, and the SM clock the run saw
//   hmma_latency        dependent mma.sync.m16n8k16 (FP16 in, FP32 accumulate), one warp
//   hmma_throughput     independent mma.sync on every SM: dense FP16 tensor FLOP/clk/SM and TFLOPS
//   pointer_chase       one thread, random cyclic chain of 128 B-strided words: cycles per hop at L1/L2/DRAM footprints
//   smem_stride         1024 threads on one SM, each warp loads word lane*stride: SM cycles per warp-load (= wavefronts)
//   stream              device-wide copy (read + write) and read-only bandwidth, GB/s
//   occupancy           resident blocks per SM measured with %smid counters vs cudaOccupancyMaxActiveBlocksPerMultiprocessor
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>
#include <string>

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

    float* fout; long long* cyc; unsigned* sink;
    CK(cudaMalloc(&fout, sizeof(float) * sms * 2048 * 4));
    CK(cudaMalloc(&cyc, sizeof(long long) * sms * 8));
    CK(cudaMalloc(&sink, sizeof(unsigned) * 1024));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    long long hc[4096];

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
        emit("sm_clock_mhz_during_ffma", num(cycles / (ms * 1e-3) / 1e6));
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

    std::printf("{\n%s\n}\n", json.c_str());
    return 0;
}
