#!/usr/bin/env bash
# Ran from the repository root on the H100 (scripts/fetch-device-deps' .deps carried), with the probes
# in scratch/ under their scratch names (see each probe's first line).
# ncu kernel durations and instruction counts: the bench's byte kernel vs the probe's copy of it; SASS of both
set -uo pipefail
t0=$(date +%s)
(cd scratch && nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 -Xcompiler -fopenmp -I../include libgap.cu -o libgap) &
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -30; exit 1; }
wait
echo "build $(( $(date +%s)-t0 )) s"
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__shared_mem_config_size
ncu --metrics $M -k regex:shared_atomic_histogram -c 4 $T bench --ops histogram --types uint8 --bins 256 --dists uniform --runs 3 --strategies replicated > $OUT/ncu-bench.txt 2>&1
ncu --metrics $M -k regex:'shared_atomic_histogram|prmt64|lib_pieces' -c 8 ./scratch/libgap > $OUT/ncu-probe.txt 2>&1
grep -E "shared_atomic|prmt64|lib_pieces|duration|inst_executed|cycles_elapsed|registers|grid_size|block_size|shared_mem" $OUT/ncu-bench.txt | head -40
echo ----
grep -E "shared_atomic|prmt64|lib_pieces|duration|inst_executed|cycles_elapsed|registers|grid_size|block_size|shared_mem" $OUT/ncu-probe.txt | head -80
cuobjdump -sass $T | awk '/Function : .*shared_atomic_histogram_kernel.*byte_shift_mapper/{p=1} p&&/Function :/&&!/byte_shift_mapper/{p=0} p' > $OUT/bench-kernel.sass
wc -l $OUT/bench-kernel.sass
echo "all $(( $(date +%s)-t0 )) s"
