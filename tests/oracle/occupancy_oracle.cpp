// Test oracle: CUDA's own occupancy calculator (cuda_occupancy.h, host-only header from the CUDA toolkit).
// Reads one launch per line on stdin:
//   major minor maxThreadsPerBlock maxThreadsPerSM regsPerBlock regsPerSM warpSize smemPerBlock smemPerSM
//   smemOptin smemReserved threads regs smemBytes carveout(-1 = default) barriers
// and prints: blocks limitRegs limitSmem limitWarps limitBlocks limitBarriers allocRegsPerBlock allocSmemPerBlock
#include <cstdio>
#include <cuda_occupancy.h>

int main() {
    int major, minor, maxTpb, maxTpsm, regsPerBlock, regsPerSm, warpSize, threads, regs, carveout, barriers;
    long smemPerBlock, smemPerSm, smemOptin, reserved, smem;
    while (std::scanf("%d %d %d %d %d %d %d %ld %ld %ld %ld %d %d %ld %d %d", &major, &minor, &maxTpb, &maxTpsm,
                      &regsPerBlock, &regsPerSm, &warpSize, &smemPerBlock, &smemPerSm, &smemOptin, &reserved,
                      &threads, &regs, &smem, &carveout, &barriers) == 16) {
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
        prop.numSms = 1;
        prop.sharedMemPerBlockOptin = smemOptin;
        prop.reservedSharedMemPerBlock = reserved;
        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = maxTpb;
        attr.numRegs = regs;
        attr.sharedSizeBytes = 0;
        attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attr.maxDynamicSharedSizeBytes = smemOptin;
        attr.numBlockBarriers = barriers;
        cudaOccDeviceState state;
        state.carveoutConfig = carveout;
        cudaOccResult result;
        cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, threads, smem);
        if (err != CUDA_OCC_SUCCESS) {
            std::printf("error %d\n", (int)err);
            continue;
        }
        std::printf("%d %d %d %d %d %d %d %ld\n", result.activeBlocksPerMultiprocessor, result.blockLimitRegs,
                    result.blockLimitSharedMem, result.blockLimitWarps, result.blockLimitBlocks,
                    result.blockLimitBarriers, result.allocatedRegistersPerBlock,
                    (long)result.allocatedSharedMemPerBlock);
    }
    return 0;
}
