#!/usr/bin/env bash
# Device run 5: Nsight Compute on the weighted kernels, int32 uniform, 4096 bins, 2^26 samples.
set -u
T=/tmp/t; rm -rf $T; mkdir -p $T && tar -C $T -xJf .device/tally-gpu.tar.xz
export LD_LIBRARY_PATH=$T/lib
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; $NCU --version | tail -1
B="$T/tally bench --ops weighted_histogram --types int32 --dists uniform --bins 4096 --sizes 2^26 --runs 1 --warmup 0"
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis"
timeout 150 $NCU --kernel-name regex:weighted_limb --launch-skip 0 --launch-count 1 $S $B > $OUT/ncu-limbs-double.txt 2>&1; echo "limbs double exit $?"
timeout 150 $NCU --kernel-name regex:weighted_limb --launch-skip 4 --launch-count 1 $S $B > $OUT/ncu-limbs-deterministic.txt 2>&1; echo "limbs det exit $?"
for f in $OUT/ncu-*.txt; do echo "== $f"; grep -E "weighted_|Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Executed Instructions  |Warp Cycles Per Issued|Stall|L1/TEX Cache Throughput|Compute \(SM\)" $f | head -30; done
