#!/usr/bin/env bash
# Ran from the repository root on the H100 (scripts/fetch-device-deps' .deps carried), with the probes
# in scratch/ under their scratch names (see each probe's first line).
# per-SM active cycles and blocks launched: the byte kernel in tally bench vs the probe's library kernel
set -uo pipefail
t0=$(date +%s)
(cd scratch && nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 -Xcompiler -fopenmp -I../include bufprobe.cu -o bufprobe 2>/dev/null) &
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > /dev/null 2>&1 && cmake --build build-gpu -j16 --target tally > /dev/null 2>&1 || exit 1
wait
echo "build $(( $(date +%s)-t0 )) s"
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
M=gpu__time_duration.sum,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_elapsed.max,sm__ctas_launched.max,sm__ctas_launched.min,sm__warps_launched.sum
echo "-- bench"; ncu --metrics $M -k regex:shared_atomic_histogram -c 2 $T bench --ops histogram --types uint8 --bins 256 --dists uniform --runs 1 --warmup 0 --strategies replicated 2>&1 | grep -E "gpu__|sm__"
echo "-- probe (dispatch, bench's data)"; ncu --metrics $M -k regex:shared_atomic_histogram -c 2 ./scratch/bufprobe 2>&1 | grep -E "gpu__|sm__"
echo "all $(( $(date +%s)-t0 )) s"
