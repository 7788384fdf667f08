#!/usr/bin/env bash
# Ran from the repository root on the H100 (scripts/fetch-device-deps' .deps carried), with the probes
# in scratch/ under their scratch names (see each probe's first line).
# load-variant probe; build tally; uint8 bench; nsys timeline of automatic uint8 if nsys exists
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
(cd scratch && nvcc -std=c++20 -O3 -arch=sm_90 loadvar.cu -o loadvar && ./loadvar) 2>&1 | tee $OUT/loadvar.txt
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
$T bench --ops histogram --types uint8 --bins 256 --runs 10 --strategies automatic,replicated,shared_atomic,cub 2>&1 | tail -30 | tee $OUT/bench-u8.txt
which nsys && nsys profile -o $OUT/u8 --force-overwrite true $T bench --ops histogram --types uint8 --bins 256 --dists uniform --runs 3 --strategies automatic > /dev/null 2>&1 && nsys stats --report cuda_gpu_trace $OUT/u8.nsys-rep 2>/dev/null | tail -40 > $OUT/trace.txt; tail -40 $OUT/trace.txt
echo "all $(( $(date +%s)-t0 )) s"
