// The kernel of ../shared/traces/accelsim-vectoradd (CUDA sample vectorAdd: 50,000 floats, 196 blocks of 256
// threads), timed on the device so gpusim's simulation of the trace has a hardware number beside it.
//
// Prints one JSON object: kernel time from CUDA events (median of many single launches, with a cold L2 and a
// warm one), the same for an empty kernel with the same grid (launch overhead), and the in-kernel span from
// %globaltimer (first block start to last block end, ns) with the timer's observed resolution.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::printf("{\"error\": \"%s at line %d\"}\n", cudaGetErrorString(e_), __LINE__); std::exit(1); } } while (0)

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void vectorAdd(const float* A, const float* B, float* C, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) C[i] = A[i] + B[i] + 0.0f;
}

__global__ void vectorAddTimed(const float* A, const float* B, float* C, int n, unsigned long long* start,
                               unsigned long long* end) {
    unsigned long long t0 = globaltimer();
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) C[i] = A[i] + B[i] + 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        start[blockIdx.x] = t0;
        end[blockIdx.x] = globaltimer();
    }
}

__global__ void vectorAddBlocks(const float* A, const float* B, float* C, int n, unsigned long long* start,
                                unsigned long long* end, long long* cycles, unsigned* smid) {
    unsigned long long t0 = globaltimer();
    long long c0 = clock64();
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) C[i] = A[i] + B[i] + 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        long long c1 = clock64();
        unsigned id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        start[blockIdx.x] = t0;
        end[blockIdx.x] = globaltimer();
        cycles[blockIdx.x] = c1 - c0;
        smid[blockIdx.x] = id;
    }
}

__global__ void empty(int) {}

__global__ void timerResolution(unsigned long long* out) {
    unsigned long long first = globaltimer(), t = first, smallest = ~0ull;
    for (int k = 0; k < 100000; ++k) {
        unsigned long long u = globaltimer();
        if (u != t) { smallest = min(smallest, u - t); t = u; }
    }
    out[0] = smallest;
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    const int n = 50000, threads = 256, blocks = (n + threads - 1) / threads;  // 196, as traced
    float *A, *B, *C, *flush;
    unsigned long long *start, *end, *res;
    const size_t flush_bytes = size_t(512) << 20;  // larger than any L2 we model
    CHECK(cudaMalloc(&A, n * 4)); CHECK(cudaMalloc(&B, n * 4)); CHECK(cudaMalloc(&C, n * 4));
    CHECK(cudaMalloc(&flush, flush_bytes));
    CHECK(cudaMalloc(&start, blocks * 8)); CHECK(cudaMalloc(&end, blocks * 8)); CHECK(cudaMalloc(&res, 8));
    std::vector<float> h(n, 1.0f);
    CHECK(cudaMemcpy(A, h.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(B, h.data(), n * 4, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0)); CHECK(cudaEventCreate(&e1));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));

    auto timed = [&](auto launch, bool cold, int reps) {
        std::vector<float> ms;
        for (int r = 0; r < reps + 5; ++r) {
            if (cold) CHECK(cudaMemset(flush, r & 0xff, flush_bytes));
            CHECK(cudaEventRecord(e0));
            launch();
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float t;
            CHECK(cudaEventElapsedTime(&t, e0, e1));
            if (r >= 5) ms.push_back(t * 1000.0f);  // microseconds
        }
        return median(ms);
    };
    auto add = [&] { vectorAdd<<<blocks, threads>>>(A, B, C, n); };
    auto nothing = [&] { empty<<<blocks, threads>>>(0); };
    float cold_us = timed(add, true, 200), warm_us = timed(add, false, 500);
    float empty_us = timed(nothing, false, 500);

    // in-kernel span, cold and warm, median over launches
    auto span = [&](bool cold) {
        std::vector<float> ns;
        std::vector<unsigned long long> s(blocks), e(blocks);
        for (int r = 0; r < 105; ++r) {
            if (cold) CHECK(cudaMemset(flush, r & 0xff, flush_bytes));
            vectorAddTimed<<<blocks, threads>>>(A, B, C, n, start, end);
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(s.data(), start, blocks * 8, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(e.data(), end, blocks * 8, cudaMemcpyDeviceToHost));
            if (r >= 5) ns.push_back(float(*std::max_element(e.begin(), e.end()) - *std::min_element(s.begin(), s.end())));
        }
        return median(ns);
    };
    float cold_span = span(true), warm_span = span(false);

    // per block, one cold launch and one warm launch: when each block started after the first one (dispatch),
    // how long it ran (ns and SM cycles), and the SM clock those imply
    long long* cyc;
    unsigned* sm;
    CHECK(cudaMalloc(&cyc, blocks * 8)); CHECK(cudaMalloc(&sm, blocks * 4));
    std::string detail;
    for (int cold = 1; cold >= 0; --cold) {
        std::vector<unsigned long long> s(blocks), e(blocks);
        std::vector<long long> c(blocks);
        std::vector<unsigned> ids(blocks);
        for (int r = 0; r < 3; ++r) {
            if (cold) CHECK(cudaMemset(flush, r & 0xff, flush_bytes));
            vectorAddBlocks<<<blocks, threads>>>(A, B, C, n, start, end, cyc, sm);
            CHECK(cudaDeviceSynchronize());
        }
        CHECK(cudaMemcpy(s.data(), start, blocks * 8, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(e.data(), end, blocks * 8, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(c.data(), cyc, blocks * 8, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(ids.data(), sm, blocks * 4, cudaMemcpyDeviceToHost));
        unsigned long long first = *std::min_element(s.begin(), s.end());
        char buf[256];
        detail += std::string(detail.empty() ? "" : ",\n") + (cold ? "    \"cold_l2\": [" : "    \"warm_l2\": [");
        for (int b = 0; b < blocks; ++b) {
            std::snprintf(buf, sizeof buf, "%s[%u, %llu, %llu, %lld]", b ? ", " : "", ids[b], s[b] - first,
                          e[b] - s[b], c[b]);
            detail += buf;
        }
        detail += "]";
    }
    timerResolution<<<1, 1>>>(res);
    unsigned long long resolution;
    CHECK(cudaMemcpy(&resolution, res, 8, cudaMemcpyDeviceToHost));
    std::vector<float> out(n);
    CHECK(cudaMemcpy(out.data(), C, n * 4, cudaMemcpyDeviceToHost));
    bool correct = std::all_of(out.begin(), out.end(), [](float x) { return x == 2.0f; });

    std::printf("{\n  \"device\": \"%s\",\n  \"sms\": %d,\n  \"max_clock_mhz\": %.0f,\n  \"n\": %d,\n"
                "  \"blocks\": %d,\n  \"threads_per_block\": %d,\n  \"correct\": %s,\n"
                "  \"event_us_cold_l2\": %.3f,\n  \"event_us_warm_l2\": %.3f,\n  \"event_us_empty_kernel\": %.3f,\n"
                "  \"globaltimer_span_ns_cold_l2\": %.0f,\n  \"globaltimer_span_ns_warm_l2\": %.0f,\n"
                "  \"globaltimer_resolution_ns\": %llu,\n"
                "  \"per_block_columns\": [\"smid\", \"start_ns_after_first\", \"duration_ns\", \"duration_sm_cycles\"],\n"
                "  \"per_block\": {\n%s\n  }\n}\n",
                prop.name, prop.multiProcessorCount, clock_khz / 1000.0, n, blocks, threads,
                correct ? "true" : "false", cold_us, warm_us, empty_us, cold_span, warm_span, resolution,
                detail.c_str());
    return 0;
}
