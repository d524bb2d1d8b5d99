// Test oracle: CUDA's own block-size advisor (cudaOccMaxPotentialOccupancyBlockSize in cuda_occupancy.h, the
// calculation behind cudaOccupancyMaxPotentialBlockSize). Reads one case per line on stdin:
//   major minor maxThreadsPerBlock maxThreadsPerSM regsPerBlock regsPerSM warpSize smemPerBlock smemPerSM
//   smemOptin smemReserved numSms regs smemBytes smemPerThread blockSizeLimit(0 = none) carveout(-1 = default)
//   barriers
// Shared memory per block is smemBytes + smemPerThread x blockSize: with smemPerThread 0 the constant variant
// (dynamicSMemSize), otherwise the VariableSMem variant with that function. Prints: minGridSize blockSize
#include <cstdio>
#include <cuda_occupancy.h>

struct PerThread {
    long base, perThread;
    size_t operator()(int blockSize) const { return (size_t)(base + perThread * blockSize); }
};

int main() {
    int major, minor, maxTpb, maxTpsm, regsPerBlock, regsPerSm, warpSize, numSms, regs, limit, carveout, barriers;
    long smemPerBlock, smemPerSm, smemOptin, reserved, smem, smemPerThread;
    while (std::scanf("%d %d %d %d %d %d %d %ld %ld %ld %ld %d %d %ld %ld %d %d %d", &major, &minor, &maxTpb,
                      &maxTpsm, &regsPerBlock, &regsPerSm, &warpSize, &smemPerBlock, &smemPerSm, &smemOptin,
                      &reserved, &numSms, &regs, &smem, &smemPerThread, &limit, &carveout, &barriers) == 18) {
        cudaOccDeviceProp prop;
        prop.computeMajor = major;
        prop.computeMinor = minor;
        prop.maxThreadsPerBlock = maxTpb;
        prop.maxThreadsPerMultiprocessor = maxTpsm;
        prop.regsPerBlock = regsPerBlock;
        prop.regsPerMultiprocessor = regsPerSm;
        prop.warpSize = warpSize;
        prop.sharedMemPerBlock = smemPerBlock;
        prop.sharedMemPerMultiprocessor = smemPerSm;
        prop.numSms = numSms;
        prop.sharedMemPerBlockOptin = smemOptin;
        prop.reservedSharedMemPerBlock = reserved;
        cudaOccFuncAttributes attr;
        // cudaOccupancyMaxPotentialBlockSize: a limit of 0 means the device's maximum; the attribute is the
        // largest block the function can use
        attr.maxThreadsPerBlock = limit == 0 ? maxTpb : limit;
        attr.numRegs = regs;
        attr.sharedSizeBytes = 0;
        attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attr.maxDynamicSharedSizeBytes = smemOptin;
        attr.numBlockBarriers = barriers;
        cudaOccDeviceState state;
        state.carveoutConfig = carveout;
        int minGridSize = -1, blockSize = -1;
        cudaOccError err;
        if (smemPerThread == 0) {
            err = cudaOccMaxPotentialOccupancyBlockSize(&minGridSize, &blockSize, &prop, &attr, &state, (size_t)smem);
        } else {
            err = cudaOccMaxPotentialOccupancyBlockSizeVariableSMem(&minGridSize, &blockSize, &prop, &attr, &state,
                                                                    PerThread{smem, smemPerThread});
        }
        if (err != CUDA_OCC_SUCCESS) {
            std::printf("error %d\n", (int)err);
            continue;
        }
        std::printf("%d %d\n", minGridSize, blockSize);
    }
    return 0;
}
