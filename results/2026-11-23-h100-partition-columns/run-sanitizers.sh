#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) on test_gpu_large_bins' int32 cases and >512 buckets, quick inputs.
set -uo pipefail
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=ON -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=OFF
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
t0=$(date +%s)
D=$OUT/r; mkdir -p $D
cmake -S . -B build-gpu "${args[@]}" > $D/configure.log 2>&1 && cmake --build build-gpu -j16 --target test_gpu_large_bins > $D/build.log 2>&1 || { grep -E "error" -A3 $D/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
for tool in memcheck racecheck synccheck; do
  ( TALLY_TEST_GPU=1 TALLY_TEST_QUICK=1 timeout 170 compute-sanitizer --tool $tool --error-exitcode 99 build-gpu/tests/gpu/test_gpu_large_bins --gtest_filter='GpuLargeBins/0.*:GpuLargeBinsBig.MoreThan512*' > $D/san-$tool.log 2>&1; echo $? > $D/san-$tool.rc ) &
done
wait
for tool in memcheck racecheck synccheck; do echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $D/san-$tool.log | tail -1) (exit $(cat $D/san-$tool.rc), $(grep -cE '^\[       OK' $D/san-$tool.log) ok, $(grep -cE '^\[  FAILED' $D/san-$tool.log) failed lines)"; done
echo "all $(( $(date +%s)-t0 )) s"
tar czf $OUT/r.tgz -C $OUT r
