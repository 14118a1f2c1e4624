#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) over a copy of the checkout with .device/ carried
# (scripts/pack-device.sh). The binaries carry absolute source paths from the machine that built them
# (BUILT_AT, default /work/main): this recreates them as links, then runs the [gpu] tests, the whole CPU test
# binary, every scenario on cuda and cpu, the benchmarks and PyTorch's SDPA on the same shapes. Logs go to $OUT.
set -uo pipefail
repo=$(pwd)
built_at=${BUILT_AT:-/work/main}
mkdir -p "$(dirname "$built_at")"
[ -e "$built_at" ] || ln -s "$repo" "$built_at"
# Tests read BUILT_AT/../shared/assets; `..` of a link resolves beside its target, so link both places.
for d in "$(dirname "$built_at")" "$(dirname "$repo")"; do
  [ -e "$d/shared" ] || ln -s "$repo/.device/shared" "$d/shared"
done
# Tests run `lab` at its build-machine path: BUILD_DIR names the build folder it was built in.
build_dir=${BUILD_DIR:-build}
mkdir -p "$built_at/$build_dir/lab" 2>/dev/null && ln -sf "$repo/.device/bin/lab" "$built_at/$build_dir/lab/lab"
export LD_LIBRARY_PATH=$repo/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$repo/.device/bin:/usr/local/cuda/bin:$PATH
export LAB_CACHE_DIR=/tmp/lab-cache
out=${OUT:-/tmp/out}
mkdir -p "$out"
step() { echo "=== $*"; timeout "${STEP_TIMEOUT:-240}" "$@"; echo "=== exit $?"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  # The [scenario] twin repeats the scenario run below (minutes at the N = 4096 shapes): run it once.
  step lab_tests "${TESTS:-[gpu]~[scenario]}"
  step lab scenario run ${SCENARIOS:-scenarios/*.toml} --backend cuda
  for k in ${BENCH_KERNELS:-detect_decode}; do step lab bench "$k" --all-variants --iters 50; done
  [ -n "${SDPA:-}" ] && step python3 bench/sdpa_compare.py
  if [ -n "${PIPELINE:-}" ]; then
    model=.device/shared/assets/models/yolo26n.pt
    step lab detect .device/shared/assets/images --backend cuda --model $model --out "$out/detect" \
      --json "$out/detect/rect.json"
    step lab detect .device/shared/assets/images/bus.jpg --square --backend cuda --model $model \
      --out "$out/detect-square" --json "$out/detect-square/square.json"
    step lab bench pipeline --model $model --batch 1
    step lab bench pipeline --model $model --batch 32 --iters 20
    step lab convert $model /tmp/yolo26n.safetensors
    step python3 bench/compare_torch.py --weights /tmp/yolo26n.safetensors \
      --golden .device/shared/assets/goldens/bus640_golden_2.safetensors \
      --golden-input .device/shared/assets/goldens/bus640_golden_0.safetensors --lab .device/bin/lab --model $model
  fi
} 2>&1 | tee "$out/device.log"
