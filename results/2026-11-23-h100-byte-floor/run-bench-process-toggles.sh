#!/usr/bin/env bash
# Ran from the repository root on the H100 (scripts/fetch-device-deps' .deps carried), with the probes
# in scratch/ under their scratch names (see each probe's first line).
# bench uint8 uniform under process-level toggles (OpenMP spinning, module loading)
set -uo pipefail
t0=$(date +%s)
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
B="bench --ops histogram --types uint8 --bins 256 --dists uniform --runs 20 --warmup 5 --strategies replicated"
r() { echo "$1: $(env $2 $T $B 2>&1 | grep -E '^uint8 ' | head -1 | awk '{print $9, $NF}')"; }
r base ""
r omp-passive "OMP_WAIT_POLICY=passive"
r omp1 "OMP_NUM_THREADS=1"
r eager "CUDA_MODULE_LOADING=EAGER"
r base2 ""
echo "all $(( $(date +%s)-t0 )) s"
