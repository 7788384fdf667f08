#!/usr/bin/env bash
# The device run behind this folder (kept in the repository root as scratch/run28.sh when it ran;
# summarize_ncu.py reads its ncu CSVs). Large bins: tests + ncu per-kernel durations of partitioned at 2^20 and 2^24 bins, five distributions.
set -uo pipefail
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=ON -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
t0=$(date +%s)
D=$OUT/r; mkdir -p $D
cmake -S . -B build-gpu "${args[@]}" > $D/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally test_gpu_large_bins > $D/build.log 2>&1 || { grep -E "error" -A3 $D/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"; grep -E "spill|stack frame" $D/build.log | grep -v " 0 bytes spill" | sort | uniq -c | head -5
TALLY_TEST_GPU=1 build-gpu/tests/gpu/test_gpu_large_bins > $D/lb.log 2>&1; echo "test_gpu_large_bins exit $? $(grep -E '^\[  (PASSED|FAILED)' $D/lb.log | tr '\n' ' ') $(( $(date +%s)-t0 )) s"
grep -E "Failure" -A6 $D/lb.log | head -30
for bins in 1048576 16777216; do
  ncu --clock-control none --metrics gpu__time_duration.sum --csv -k 'regex:partition|bucket_histogram|Scan' \
    build-gpu/tally bench --types int32 --bins $bins --strategies partitioned --runs 1 --warmup 0 --quiet \
    > $D/ncu-$bins.csv 2> $D/ncu-$bins.err
  grep -iE "mismatch|wrong|error" $D/ncu-$bins.err $D/ncu-$bins.csv | grep -v "^.*,\"" | head -5
done
echo "all $(( $(date +%s)-t0 )) s"
tar czf $OUT/r.tgz -C $OUT r && rm -rf $D
