#!/usr/bin/env bash
# Why pass 1 at 2^24 bins is slower than at 2^20 on one value: DRAM bytes, L2 write sectors, instructions.
set -uo pipefail
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF -DTALLY_BUILD_EXAMPLES=OFF -DTALLY_BUILD_CLI=ON
      -DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr -DTALLY_GTEST_SOURCE_DIR=$PWD/.deps/root/usr/src/googletest)
t0=$(date +%s)
D=$OUT/r; mkdir -p $D
cmake -S . -B build-gpu "${args[@]}" > $D/configure.log 2>&1 && cmake --build build-gpu -j16 --target tally > $D/build.log 2>&1 || { grep -E "error" -A3 $D/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
m=gpu__time_duration.sum,dram__bytes_write.sum,dram__bytes_read.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_drain
for bins in 1048576 16777216; do for d in single uniform; do
  ncu --clock-control none --metrics $m --csv -k 'regex:partition_kernel' -c 1 \
    build-gpu/tally bench --types int32 --bins $bins --dists $d --strategies partitioned --runs 1 --warmup 0 --quiet \
    > $D/m-$bins-$d.csv 2> $D/m-$bins-$d.err
  echo "== $bins $d"; grep -E '^"' $D/m-$bins-$d.csv | awk -F'","' '{print $(NF-3), $(NF-2), $NF}' | tail -n +2
done; done
echo "all $(( $(date +%s)-t0 )) s"
