// What every CUDA twin in validation/kernels/ shares: its parameters (the workload YAML's, as name=value
// arguments), buffer set-up, timing with CUDA events over repetitions, and the JSON line `gpusim validate` reads.
//
// A twin runs the program of one workload YAML with the same grid and block: the same loads and stores at the same
// addresses, the same synchronisation and the same instruction kinds (nvcc schedules and allocates registers as it
// does). Where a YAML stands a 16-byte load in for a fragment load, the twin does the same, so a GEMM twin's C is a
// permutation of the products, not A x B: these kernels time the program, they are not a library.
//
//   ./twin [name=value ...] [reps=N]     prints one JSON object: {"workload", "yaml", "params", "grid", "block",
//                                        "dynamic_smem", "reps", "trials", "time_ms" (the median trial's time per
//                                        launch), "min_ms", "device", "sms"}
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define TWIN_CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); std::exit(1); } } while (0)

struct TwinParams {
    std::vector<std::pair<std::string, long long>> values;  // in the YAML's order
    int reps = 20;

    TwinParams(int argc, char** argv, std::initializer_list<std::pair<const char*, long long>> defaults) {
        for (auto& d : defaults) values.emplace_back(d.first, d.second);
        for (int i = 1; i < argc; i++) {
            const char* eq = std::strchr(argv[i], '=');
            if (!eq) { std::fprintf(stderr, "expected name=value, got %s\n", argv[i]); std::exit(2); }
            std::string name(argv[i], eq - argv[i]);
            long long v = std::atoll(eq + 1);
            if (name == "reps") { reps = (int)std::max(1LL, v); continue; }
            bool found = false;
            for (auto& p : values) if (p.first == name) { p.second = v; found = true; }
            if (!found) { std::fprintf(stderr, "unknown parameter %s\n", name.c_str()); std::exit(2); }
        }
    }
    long long operator[](const char* name) const {
        for (auto& p : values) if (p.first == name) return p.second;
        std::fprintf(stderr, "no parameter %s\n", name); std::exit(2);
    }
};

template <class T>
static T* twin_alloc(size_t count, int fill_byte = 0) {
    T* p = nullptr;
    TWIN_CHECK(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)));
    TWIN_CHECK(cudaMemset(p, fill_byte, std::max<size_t>(count, 1) * sizeof(T)));
    return p;
}

// Time `launch` (one kernel launch): `reps` launches back to back between two CUDA events, per launch, in each of
// TWIN_TRIALS trials after two warm-up launches (back to back, the launch latency is mostly hidden, as in an
// application's stream of kernels); milliseconds per launch, one value per trial.
constexpr int TWIN_TRIALS = 5;

template <class Launch>
static std::vector<float> twin_time(Launch launch, int reps) {
    cudaEvent_t a, b;
    TWIN_CHECK(cudaEventCreate(&a));
    TWIN_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 2; i++) launch();
    TWIN_CHECK(cudaGetLastError());
    TWIN_CHECK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int t = 0; t < TWIN_TRIALS; t++) {
        TWIN_CHECK(cudaEventRecord(a));
        for (int i = 0; i < reps; i++) launch();
        TWIN_CHECK(cudaEventRecord(b));
        TWIN_CHECK(cudaEventSynchronize(b));
        TWIN_CHECK(cudaGetLastError());
        float total = 0;
        TWIN_CHECK(cudaEventElapsedTime(&total, a, b));
        ms.push_back(total / reps);
    }
    TWIN_CHECK(cudaEventDestroy(a));
    TWIN_CHECK(cudaEventDestroy(b));
    return ms;
}

static void twin_report(const char* workload, const char* yaml, const TwinParams& params, dim3 grid, dim3 block,
                        size_t dynamic_smem, std::vector<float> ms, const char* extra = "") {
    std::sort(ms.begin(), ms.end());
    cudaDeviceProp prop;
    TWIN_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::string ps;
    for (auto& p : params.values)
        ps += (ps.empty() ? "" : ", ") + std::string("\"") + p.first + "\": " + std::to_string(p.second);
    std::printf("{\"workload\": \"%s\", \"yaml\": \"%s\", \"params\": {%s}, \"grid\": [%u, %u, %u], "
                "\"block\": [%u, %u, %u], \"dynamic_smem\": %zu, \"reps\": %d, \"trials\": %zu, \"time_ms\": %.6f, "
                "\"min_ms\": %.6f, "
                "\"device\": \"%s\", \"sms\": %d%s%s}\n",
                workload, yaml, ps.c_str(), grid.x, grid.y, grid.z, block.x, block.y, block.z, dynamic_smem,
                params.reps, ms.size(), ms[ms.size() / 2], ms[0], prop.name, prop.multiProcessorCount, extra[0] ? ", " : "", extra);
}

// ex2.approx.ftz.f32: one MUFU.EX2, as the YAMLs write it
__device__ __forceinline__ float twin_ex2(float x) {
    float y;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// mma.sync.m16n8k16 FP16 x FP16 + FP32 (HMMA.16816.F32)
__device__ __forceinline__ void twin_mma16816(float* c, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint4 twin_lds128(unsigned smem_addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(smem_addr));
    return v;
}

__device__ __forceinline__ void twin_sts128(unsigned smem_addr, uint4 v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(smem_addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

__device__ __forceinline__ unsigned twin_smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
