#!/usr/bin/env bash
# Session 34: float32 samples over the float64 rule's edges with an edge table (a sample near an
# edge reads it rather than computing it in double). PART=tests: GPU tests and sanitizers;
# PART=bench: the landed build (s33c) against this one with the table's gate at 2^-8
# (TALLY_PROBE_TABLE_MARGIN unset), at 0.6 (every margin within the reach settles) and at 2^-6.
set -u
N=/tmp/new; B=/tmp/before; mkdir -p $N $B
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
summary=()
if [ "${PART:-tests}" = tests ]; then
  tar -C $N -xJf .device/${TESTTAR:-s34a}.tar.xz
  S=$(command -v compute-sanitizer || ls /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
  for t in test_gpu_histogram test_gpu_weighted test_gpu_large_bins; do
    [ -x $N/tests/gpu/$t ] || continue
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
  tar -C $N -xJf .device/${NEWTAR:-s34a-tool}.tar.xz; tar -C $B -xJf .device/s33c-tool.tar.xz
  common="--ops histogram --sizes 2^28 --runs 10 --warmup 2 --range-kind general --dists uniform,geometric,single,sorted,loguniform,strided32,few_hot --bins ${BINS:-256,4096,16384,65536} --types float32"
  run() { local name=$1; shift; local t0=$(date +%s); timeout 200 env "$@" --csv $OUT/$name.csv > $OUT/$name.log 2>&1; summary+=("$name rc=$? $(( $(date +%s)-t0 ))s"); }
  for pass in ${PASSES:-1 2}; do
    run base-$pass $B/tally bench $common --strategies automatic
    run t8-$pass $N/tally bench $common --strategies automatic
    run tall-$pass TALLY_PROBE_TABLE_MARGIN=0.6 $N/tally bench $common --strategies automatic
    [ $pass = 1 ] && run t6-$pass TALLY_PROBE_TABLE_MARGIN=0.0157 $N/tally bench $common --strategies automatic
  done
  python3 - <<'PY' | tee $OUT/compare.txt
import csv,os,glob
def load(p):
    return {(r['type'],r['bins'],r['distribution'],r['strategy']):(float(r['read_fraction']),r['used'],r['check']) for r in csv.DictReader(l for l in open(p) if not l.startswith('#'))}
o=os.environ['OUT']; names=sorted(os.path.basename(p)[:-4] for p in glob.glob(f"{o}/*.csv"))
runs={n:load(f"{o}/{n}.csv") for n in names}
first=runs[names[0]]
print('type bins distribution strategy used check', *names)
for k in sorted(first, key=lambda k:(k[0],int(k[1]),k[3],k[2])):
    print(*k, first[k][1], ','.join(sorted({runs[n][k][2] for n in runs if k in runs[n]})), *[f"{runs[n][k][0]:.3f}" if k in runs[n] else '-' for n in runs])
PY
fi
printf "%s\n" "${summary[@]}" | tee $OUT/summary-${PART:-tests}.txt
