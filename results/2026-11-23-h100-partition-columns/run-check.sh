#!/usr/bin/env bash
# Thread-column ranking, gathered cells, hot-gated rounds: every test (GPU included) and the large-bin bench.
set -uo pipefail
t0=$(date +%s)
D=$OUT/r; mkdir -p $D
OUT=$D scripts/gpu-check test > $D/gpu-check-test.txt 2>&1
echo "test part $(( $(date +%s)-t0 )) s"; sed -n '/== summary/,$p' $D/gpu-check-test.txt
grep -E "^\s*[0-9]+ - .*(Failed|Exception)|\*\*\*Failed" $D/ctest.log | head -10
grep -E "Failure|exception" -A4 $D/ctest.log | head -20
OUT=$D BENCH_ARGS="--runs 10" scripts/gpu-check large-bins > $D/gpu-check-large.txt 2>&1
echo "large part $(( $(date +%s)-t0 )) s"; sed -n '/== summary/,$p' $D/gpu-check-large.txt | cut -c1-160
python3 - $D/bench-large-bins.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
rows=d.get('rows',d.get('results',[]))
for r in rows:
    if r.get('strategy') in ('automatic','partitioned','cub'):
        print(r.get('bins'), r.get('distribution'), r.get('strategy'), round(r.get('read_fraction') or 0,3), r.get('median_ms'))
PY
tar czf $OUT/r.tgz -C $OUT r && rm -rf $D
