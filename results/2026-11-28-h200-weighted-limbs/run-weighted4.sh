#!/usr/bin/env bash
# Device run 4: shared atomics at addresses computed once, a float's fixed-point value in integers; tests, bench, Python peers, sanitizers.
set -u
T=/tmp/t; rm -rf $T; mkdir -p $T && tar -C $T -xJf .device/tally-gpu.tar.xz
P=/tmp/p; rm -rf $P; mkdir -p $P && tar -C $P -xJf .device/py312.tar.xz
export LD_LIBRARY_PATH=$T/lib:$(python3 -c "import nvidia.nccl,os; print(os.path.join(list(nvidia.nccl.__path__)[0],'lib'))" 2>/dev/null)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt; date -u >> $OUT/machine.txt
mkdir -p $OUT/logs
start=$(date +%s)
TALLY_TEST_GPU=1 timeout 200 $T/tests/gpu/test_gpu_weighted > $OUT/logs/test_gpu_weighted.log 2>&1; echo "test_gpu_weighted exit $? in $(( $(date +%s) - start )) s"
TALLY_SHARED_MEMORY_PER_BLOCK=101376 TALLY_TEST_GPU=1 timeout 200 $T/tests/gpu/test_gpu_weighted > $OUT/logs/test_gpu_weighted_99k.log 2>&1; echo "test_gpu_weighted_99k exit $?"
CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 TALLY_TEST_GPU=1 timeout 200 $T/tests/gpu/test_nccl > $OUT/logs/test_nccl.log 2>&1; echo "test_nccl exit $?"
for f in $OUT/logs/test_*.log; do echo "$(basename $f): $(grep -E '^\[  (PASSED|FAILED) ' $f | tr '\n' ' ')"; done | tee $OUT/summary-tests.txt
grep -h "Failure\|error:" $OUT/logs/test_gpu_weighted.log | head -5
start=$(date +%s)
$T/tally bench --ops weighted_histogram --types int32 --dists uniform,geometric,single,sorted,loguniform,strided32,few_hot \
  --bins 256,4096 --sizes 2^28 --runs 5 \
  --json $OUT/bench-weighted.json --csv $OUT/bench-weighted.csv > $OUT/bench-weighted.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - start )) s"
start=$(date +%s)
PYTHONPATH=$P timeout 200 python3 -m tally.bench --weighted --bins 4096 --runs 2 --csv $OUT/python-weighted.csv > $OUT/python-weighted.txt 2>&1
echo "python bench exit $? in $(( $(date +%s) - start )) s"
start=$(date +%s)
san() { TALLY_TEST_QUICK=1 timeout 150 compute-sanitizer --tool $1 --error-exitcode 99 $T/tests/gpu/test_gpu_weighted --gtest_filter="$2" > $OUT/logs/$3.log 2>&1; echo "$3: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/logs/$3.log | tail -1)" >> $OUT/summary-sanitizers.txt; }
san memcheck '*Int32Samples*:*WeightsAtTheEdges*:*NanAndInfinite*:*Refuses*' memcheck-weighted &
san racecheck '*Int32Samples*:*WeightsAtTheEdges*' racecheck-weighted &
san synccheck '*Int32Samples*:*WeightsAtTheEdges*' synccheck-weighted &
wait
echo "sanitizers took $(( $(date +%s) - start )) s"; cat $OUT/summary-sanitizers.txt
cd $OUT && tar -cJf logs.tar.xz logs && rm -rf logs
tail -30 $OUT/python-weighted.txt
