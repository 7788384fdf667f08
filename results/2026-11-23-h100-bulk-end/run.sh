#!/usr/bin/env bash
# byte kernel with one bulk reduction per block at the end: bench (uint8, 256 bins) twice, then test_gpu_histogram and test_gpu_block_pieces
set -uo pipefail
t0=$(date +%s)
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=ON -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
cmake -S . -B build-gpu "${args[@]}" > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally test_gpu_histogram test_gpu_block_pieces > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
T=$(find build-gpu -name tally -type f -perm -u+x | head -1)
for i in 1 2; do
  $T bench --ops histogram --types uint8 --bins 256 --dists uniform,single,sorted,geometric,loguniform --runs 20 --warmup 5 \
    --strategies replicated,automatic,shared_atomic,cub --json $OUT/bench-u8-$i.json --csv $OUT/bench-u8-$i.csv > $OUT/bench-u8-$i.txt 2>$OUT/bench-u8-$i.log
  echo "bench $i exit $?"; cat $OUT/bench-u8-$i.txt
done
echo "bench done $(( $(date +%s)-t0 )) s"
for t in test_gpu_block_pieces test_gpu_histogram; do
  TALLY_TEST_GPU=1 timeout 300 build-gpu/tests/gpu/$t > $OUT/$t.log 2>&1; echo "$t exit $?"; grep -E "PASSED|FAILED|tests ran" $OUT/$t.log | head -20
done
echo "all $(( $(date +%s)-t0 )) s"
