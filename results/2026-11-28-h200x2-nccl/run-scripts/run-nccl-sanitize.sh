#!/usr/bin/env bash
# Device run 3 (one GPU): test_nccl under memcheck and racecheck with one rank (compute-sanitizer
# serializes kernels, and two ranks' NCCL kernels must run at once: under it they wait forever).
set -u
T=/tmp/t; mkdir -p $T && tar -C $T -xJf .device/tally-gpu.tar.xz
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=$T/lib:$NCCL_LIB:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
for tool in memcheck racecheck synccheck; do
  (TALLY_TEST_QUICK=1 timeout 400 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 $T/tests/gpu/test_nccl > $OUT/$tool-test_nccl.log 2>&1; echo "$tool test_nccl: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool-test_nccl.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' $OUT/$tool-test_nccl.log | tr '\n' ' ')" >> $OUT/summary.txt) &
done
wait
echo "took $(( $(date +%s) - start )) s" >> $OUT/summary.txt
cat $OUT/summary.txt
