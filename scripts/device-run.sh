#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) over a copy of the checkout with .device/ carried:
# recreates the paths the binaries were built with, then runs the [gpu] tests, every scenario on cuda and cpu,
# the benchmarks, and PyTorch's SDPA on the same shapes. Logs go to $OUT.
set -uo pipefail
repo=$(pwd)
mkdir -p /work
[ -e /work/main ] || ln -s "$repo" /work/main
[ -e /work/shared ] || ln -s "$repo/.device/shared" /work/shared
export LD_LIBRARY_PATH=$repo/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$repo/.device/bin:/usr/local/cuda/bin:$PATH
export LAB_CACHE_DIR=/tmp/lab-cache
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
step() { echo "=== $*"; "$@"; echo "=== exit $?"; }
{
  step lab list
  step lab_tests "[gpu]"
  step lab_tests "~[gpu]"
  step lab scenario run scenarios/*.toml --backend cuda
  for k in $(lab list --json | python3 -c 'import json,sys; print(" ".join(r["name"] for r in json.load(sys.stdin)))'); do
    step lab bench "$k" --all-variants
  done
  [ -f bench/sdpa_compare.py ] && step python3 bench/sdpa_compare.py
} 2>&1 | tee "$out/device.log"
