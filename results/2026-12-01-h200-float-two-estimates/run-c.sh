#!/usr/bin/env bash
# Session 33, run C (final): the vector form clamped to the bins, a branch a sample near an edge, only where the margin is at most 2^-8 (two float
# estimates, the edge only near one). PART=tests: GPU tests and sanitizers; PART=bench: this build
# and the landed one (s32d), new / base / new / base.
set -u
N=/tmp/new; B=/tmp/before; mkdir -p $N $B
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
summary=()
if [ "${PART:-tests}" = tests ]; then
  tar -C $N -xJf .device/s33c.tar.xz
  S=$(command -v compute-sanitizer || ls /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
  for t in test_gpu_histogram test_gpu_weighted test_gpu_large_bins; do
    t0=$(date +%s)
    $N/tests/gpu/$t --gtest_brief=1 > $OUT/$t.log 2>&1; rc=$?
    summary+=("$t rc=$rc $(grep -E '^\[  PASSED|FAILED' $OUT/$t.log | head -4 | tr '\n' ' ') $(( $(date +%s)-t0 ))s")
  done
  for tool in memcheck racecheck synccheck; do
    t0=$(date +%s)
    TALLY_TEST_QUICK=1 $S --tool $tool --error-exitcode 9 $N/tests/gpu/test_gpu_histogram --gtest_filter='GpuHistogramFloatEdges.*' --gtest_brief=1 > $OUT/san-$tool.log 2>&1; rc=$?
    summary+=("$tool FloatEdges rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.log | tail -1) $(( $(date +%s)-t0 ))s")
  done
else
  tar -C $N -xJf .device/s33c-tool.tar.xz; tar -C $B -xJf .device/s32d-tool.tar.xz
  common="--ops histogram --sizes 2^28 --runs 10 --warmup 2 --range-kind general --dists uniform,geometric,single,sorted,loguniform,strided32,few_hot --bins 256,4096,16384,65536 --types float32"
  t0=$(date +%s)
  $N/tally bench $common --strategies automatic,cub --csv $OUT/new-1.csv > /dev/null 2>&1; summary+=("new-1 rc=$? $(( $(date +%s)-t0 ))s")
  $B/tally bench $common --strategies automatic --csv $OUT/base-1.csv > /dev/null 2>&1; summary+=("base-1 rc=$?")
  $N/tally bench $common --strategies automatic --csv $OUT/new-2.csv > /dev/null 2>&1; summary+=("new-2 rc=$?")
  $B/tally bench $common --strategies automatic --csv $OUT/base-2.csv > /dev/null 2>&1; summary+=("base-2 rc=$? $(( $(date +%s)-t0 ))s")
  python3 - <<'PY' | tee $OUT/compare.txt
import csv,os
def load(p):
    return {(r['type'],r['bins'],r['distribution'],r['strategy']):(float(r['read_fraction']),r['used'],r['check']) for r in csv.DictReader(l for l in open(p) if not l.startswith('#'))}
o=os.environ['OUT']; runs={n:load(f"{o}/{n}.csv") for n in ['new-1','base-1','new-2','base-2']}
print('type bins distribution strategy used check', *runs)
for k in sorted(runs['new-1'], key=lambda k:(k[0],int(k[1]),k[3],k[2])):
    print(*k, runs['new-1'][k][1], runs['new-1'][k][2], *[f"{runs[n][k][0]:.3f}" if k in runs[n] else '-' for n in runs])
PY
fi
printf "%s\n" "${summary[@]}" | tee $OUT/summary-${PART:-tests}.txt
