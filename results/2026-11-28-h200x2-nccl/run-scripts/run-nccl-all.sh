#!/usr/bin/env bash
bash .device/run-nccl-tests.sh
echo ==== bench
bash .device/run-nccl-bench.sh
