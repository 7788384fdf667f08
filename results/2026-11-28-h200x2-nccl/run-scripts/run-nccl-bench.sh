#!/usr/bin/env bash
# Device run 2 (nvidia-h200-x2): tally bench --gpus 2, 2^30 samples.
set -u
T=/tmp/t; mkdir -p $T && [ -x $T/tally ] || tar -C $T -xJf .device/tally-gpu.tar.xz
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=$T/lib:$NCCL_LIB:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
start=$(date +%s)
timeout 280 $T/tally bench --gpus 2 --types int32,float32 --bins 256,4096,65536 --dists uniform --sizes 2^30 \
  --json $OUT/bench-gpus.json --csv $OUT/bench-gpus.csv > $OUT/bench-gpus.txt 2> $OUT/bench-gpus.err; echo "bench exit $?"
timeout 200 $T/tally bench --gpus 2 --types int32 --bins 4096 --dists geometric,single,sorted --sizes 2^30,2^28 \
  --json $OUT/bench-gpus-crowded.json --csv $OUT/bench-gpus-crowded.csv > $OUT/bench-gpus-crowded.txt 2> $OUT/bench-gpus-crowded.err; echo "bench 2 exit $?"
echo "took $(( $(date +%s) - start )) s"
cat $OUT/bench-gpus.txt $OUT/bench-gpus-crowded.txt; tail -3 $OUT/*.err
