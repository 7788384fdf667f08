#!/usr/bin/env bash
# Ran from the repository root on the H100 (scripts/fetch-device-deps' .deps carried), with the probes
# in scratch/ under their scratch names (see each probe's first line).
# bench order test; ncu on the probe's library kernel and the bench's, same metrics
set -uo pipefail
t0=$(date +%s)
(cd scratch && nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 -Xcompiler -fopenmp -I../include libgap.cu -o libgap 2>/dev/null) &
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -30; exit 1; }
wait
echo "build $(( $(date +%s)-t0 )) s"
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
$T bench --ops histogram --types uint8 --bins 256 --dists single,uniform,loguniform --runs 20 --warmup 5 --strategies replicated 2>&1 | grep -E "^uint8 " | head -3
$T bench --ops histogram --types uint8 --bins 256 --dists uniform --runs 20 --warmup 5 --strategies replicated --timing with_launch 2>&1 | grep -E "^uint8 " | head -1
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum
ncu --metrics $M -k regex:shared_atomic_histogram -c 2 $T bench --ops histogram --types uint8 --bins 256 --dists uniform --runs 1 --warmup 0 --strategies replicated 2>&1 | grep -E "duration|inst_exec|cycles_el|dram__|lts__"
echo ---- probe
ncu --metrics $M -k regex:shared_atomic_histogram -c 2 ./scratch/libgap 2>&1 | grep -E "duration|inst_exec|cycles_el|dram__|lts__"
echo "all $(( $(date +%s)-t0 )) s"
