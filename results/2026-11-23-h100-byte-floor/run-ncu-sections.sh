#!/usr/bin/env bash
# Ran from the repository root on the H100 (scripts/fetch-device-deps' .deps carried), with the probes
# in scratch/ under their scratch names (see each probe's first line).
# ncu sections for the byte kernel in tally bench vs the same kernel in the probe (same data generator)
set -uo pipefail
t0=$(date +%s)
(cd scratch && nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 -Xcompiler -fopenmp -I../include bufprobe.cu -o bufprobe 2>/dev/null) &
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -30; exit 1; }
wait
echo "build $(( $(date +%s)-t0 )) s"
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy"
ncu $S -k regex:shared_atomic_histogram -c 1 $T bench --ops histogram --types uint8 --bins 256 --dists uniform --runs 1 --warmup 0 --strategies replicated > $OUT/ncu-bench-sections.txt 2>&1
ncu $S -k regex:shared_atomic_histogram -c 1 ./scratch/bufprobe > $OUT/ncu-probe-sections.txt 2>&1
diff <(grep -E "^\s+[A-Z]" $OUT/ncu-bench-sections.txt | sed -E 's/  +/ /g') <(grep -E "^\s+[A-Z]" $OUT/ncu-probe-sections.txt | sed -E 's/  +/ /g') | head -60
echo "all $(( $(date +%s)-t0 )) s"
