#!/usr/bin/env bash
# Device run 1 (nvidia-h200-x2): the NCCL layer's tests on 2 ranks and on 1, the multi-process
# example, the CLI's --gpus tests, the one-GPU reduce and weighted tests, memcheck on test_nccl.
set -u
T=/tmp/t; mkdir -p $T && tar -C $T -xJf .device/tally-gpu.tar.xz
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=$T/lib:$NCCL_LIB:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
date -u >> $OUT/machine.txt
ldd $T/tests/gpu/test_nccl | grep -E "nccl|not found" | tee -a $OUT/machine.txt
mkdir -p $OUT/logs
S=$OUT/summary.txt
start=$(date +%s)
timeout 300 $T/tests/gpu/test_nccl > $OUT/logs/test_nccl.log 2>&1; echo "test_nccl (2 GPUs): exit $? $(grep -E '^\[  (PASSED|FAILED) |SKIPPED' $OUT/logs/test_nccl.log | tr '\n' ' ')" >> $S
CUDA_VISIBLE_DEVICES=0 timeout 300 $T/tests/gpu/test_nccl > $OUT/logs/test_nccl_1gpu.log 2>&1; echo "test_nccl (1 GPU): exit $? $(grep -E '^\[  (PASSED|FAILED) |SKIPPED \[' $OUT/logs/test_nccl_1gpu.log | tr '\n' ' ')" >> $S
timeout 120 $T/examples/example_nccl_processes 100000019 > $OUT/logs/example.log 2>&1; echo "example_nccl_processes: exit $? $(tail -1 $OUT/logs/example.log)" >> $S
echo "nccl tests took $(( $(date +%s) - start )) s" >> $S
(TALLY_TEST_QUICK=1 timeout 300 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 $T/tests/gpu/test_nccl > $OUT/logs/memcheck-test_nccl.log 2>&1; echo "memcheck test_nccl: exit $? $(grep -E 'ERROR SUMMARY' $OUT/logs/memcheck-test_nccl.log | tail -1)" >> $S) &
(CUDA_VISIBLE_DEVICES=1 TALLY_TEST_GPU=1 timeout 400 $T/tests/gpu/test_gpu_reduce > $OUT/logs/test_gpu_reduce.log 2>&1; echo "test_gpu_reduce: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/logs/test_gpu_reduce.log | tr '\n' ' ')" >> $S
 CUDA_VISIBLE_DEVICES=1 TALLY_TEST_GPU=1 timeout 400 $T/tests/gpu/test_gpu_weighted > $OUT/logs/test_gpu_weighted.log 2>&1; echo "test_gpu_weighted: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/logs/test_gpu_weighted.log | tr '\n' ' ')" >> $S) &
TALLY_BIN=$T/tally TALLY_TEST_GPU=1 timeout 400 python3 -m pytest -q -p no:cacheprovider tests/cli/test_hist.py -k gpus > $OUT/logs/cli-gpus.log 2>&1; echo "cli --gpus tests: exit $? $(tail -1 $OUT/logs/cli-gpus.log)" >> $S
wait
echo "all took $(( $(date +%s) - start )) s" >> $S
cd $OUT && tar -cJf logs.tar.xz logs && rm -rf logs
cat $S
