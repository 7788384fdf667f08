#!/usr/bin/env bash
# Ran from the repository root on the H100 (scripts/fetch-device-deps' .deps carried), with the probes
# in scratch/ under their scratch names (see each probe's first line).
# probe vs bench on the same machine, with SM clocks sampled during each
set -uo pipefail
t0=$(date +%s)
(cd scratch && nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 -Xcompiler -fopenmp -I../include libgap.cu -o libgap) &
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -30; exit 1; }
wait
echo "build $(( $(date +%s)-t0 )) s"
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
clocks() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 50 > $OUT/clk-$1.txt & CP=$!; }
clocks probe1; ./scratch/libgap | grep -v single > $OUT/probe1.txt; kill $CP
clocks bench; $T bench --ops histogram --types uint8 --bins 256 --dists uniform,single --runs 20 --strategies automatic,replicated 2>&1 | grep -E "uint8 " > $OUT/bench.txt; kill $CP
clocks probe2; ./scratch/libgap | grep -v single > $OUT/probe2.txt; kill $CP
cat $OUT/probe1.txt $OUT/bench.txt $OUT/probe2.txt
for f in probe1 bench probe2; do echo "$f clocks: $(awk -F, '{print $1}' $OUT/clk-$f.txt | sort | uniq -c | sort -rn | head -4 | tr '\n' ' ')"; done
echo "all $(( $(date +%s)-t0 )) s"
