"""The instruction set: opcodes and their pipes (opcodes, opinfo), the warp-instruction the engine issues (inst) and
the tensor-core instructions' shapes, precisions and rates on a part (tensor). Everything above the arch spec reads
it: the analytic models, the workload and trace front ends, memory, statistics and the engine."""
