#!/usr/bin/env bash
# Thread-column ranking + gathered cell writes: build, test_gpu_large_bins, ncu kernel durations, SASS.
set -uo pipefail
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=ON -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
t0=$(date +%s)
D=$OUT/r; mkdir -p $D
cmake -S . -B build-gpu "${args[@]}" > $D/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally test_gpu_large_bins > $D/build.log 2>&1 || { grep -E "error" -A3 $D/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
TALLY_TEST_GPU=1 build-gpu/tests/gpu/test_gpu_large_bins > $D/lb.log 2>&1; echo "test_gpu_large_bins exit $? $(grep -E '^\[  (PASSED|FAILED)' $D/lb.log | tr '\n' ' ') $(( $(date +%s)-t0 )) s"
grep -E "Failure|^\[  FAILED" -A6 $D/lb.log | head -30
grep -E "^\[       OK" $D/lb.log | sed 's/.*OK ] //' | tr '\n' ' '; echo
for bins in 1048576 16777216; do
  ncu --clock-control none --metrics gpu__time_duration.sum --csv -k 'regex:partition|bucket_histogram|Scan' \
    build-gpu/tally bench --types int32 --bins $bins --strategies partitioned --runs 1 --warmup 0 --quiet \
    > $D/ncu-$bins.csv 2> $D/ncu-$bins.err
  grep -iE "mismatch|wrong|error" $D/ncu-$bins.err | head -5; grep -E "verif" $D/ncu-$bins.csv | head -3
done
python3 scratch/ncu_sum.py $D/ncu-*.csv
for d in single uniform; do ncu --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv -k regex:partition_kernel -c 4 build-gpu/tally bench --types int32 --bins 1048576,16777216 --dists $d --strategies partitioned --runs 1 --warmup 0 --quiet 2>/dev/null | grep -E '^"' | awk -F'","' '{print $(NF-3), $NF}' | tail -n +2 | tr '\n' ' '; echo " $d"; done
echo "ncu done $(( $(date +%s)-t0 )) s"
lib=$(find build-gpu -name "libtally*" | head -1); cuobjdump -sass $lib 2>/dev/null | awk '/Function : .*partition_kernelIiNS0_20unit_step_bin_mapperIiEELb1ELNS0_12tile_rankingE0E/{p=1} p{print} /Function : / && !/partition_kernelIiNS0_20unit_step_bin_mapperIiEELb1ELNS0_12tile_rankingE0E/{p=0}' > $D/sass-unit-staged-columns.txt; wc -l $D/sass-unit-staged-columns.txt; grep -c "STL\|LDL" $D/sass-unit-staged-columns.txt
echo "all $(( $(date +%s)-t0 )) s"
tar czf $OUT/r.tgz -C $OUT r && rm -rf $D
