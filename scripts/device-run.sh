#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) over a copy of the checkout with .device/ carried
# (scripts/pack-device.sh). The binaries carry absolute source paths from the machine that built them
# (BUILT_AT, default /work/main): this recreates them as links, then runs the [gpu] tests, the whole CPU test
# binary, every scenario on cuda and cpu, the benchmarks and PyTorch's SDPA on the same shapes. Logs go to $OUT.
set -uo pipefail
repo=$(pwd)
# scripts/pack-device.sh sends .device/ gzipped (.device.tgz), carried afresh by every call: unpack it every
# time, since a warm machine keeps the ignored .device/ of its last call (an older pack).
[ -f .device.tgz ] && rm -rf .device && tar -xzf .device.tgz
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
# The kernel cache of an earlier call (its $OUT/lab-cache.tgz, carried back as .lab-cache.tgz) spares the
# minutes NVRTC takes for the training pass's instances on an empty cache; every run leaves its cache there.
[ -f .lab-cache.tgz ] && [ ! -d "$LAB_CACHE_DIR" ] && tar -xzf .lab-cache.tgz -C "$(dirname "$LAB_CACHE_DIR")"
mkdir -p "$LAB_CACHE_DIR"
# lab_tests compiles into a cache of its own (tests/test_helpers.cpp: <tmp>/lab-test-cache-<uid>): the same
# one here, so the tests start from the carried entries and the returned cache keeps theirs.
test_cache=/tmp/lab-test-cache-$(id -u)
[ -e "$test_cache" ] || ln -s "$LAB_CACHE_DIR" "$test_cache"
# PLplot's run-time pieces for results.png, packed by pack-device.sh (the GPU machine has no PLplot).
export PLPLOT_DRV_DIR=$repo/.device/lib/plplot/drivers PLPLOT_LIB=$repo/.device/share/plplot
out=${OUT:-/tmp/out}
mkdir -p "$out"
step() { echo "=== $*" >&2; timeout "${STEP_TIMEOUT:-240}" "$@"; echo "=== exit $?" >&2; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  # The [scenario] twin repeats the scenario run below (minutes at the N = 4096 shapes): run it once.
  # TESTS, SCENARIOS or BENCH_KERNELS set to "none" skips that step.
  [ "${TESTS:-}" != none ] && step lab_tests "${TESTS:-[gpu]~[scenario]}"
  # SCENARIO_ARGS=--no-bench-cases leaves out the batch-32 shapes whose float64 checks take minutes.
  [ "${SCENARIOS:-}" != none ] && step lab scenario run ${SCENARIOS:-scenarios/*.toml} --backend cuda ${SCENARIO_ARGS:-}
  if [ "${BENCH_KERNELS:-}" != none ]; then
    for k in ${BENCH_KERNELS:-detect_decode}; do
      step lab bench "$k" --all-variants --iters 50
      # A/B: the same benchmark with the binary BASELINE_LAB names (packed into .device/bin by pack-device.sh).
      [ -n "${BASELINE_LAB:-}" ] && step "$repo/.device/bin/$(basename "$BASELINE_LAB")" bench "$k" --all-variants --iters 50
    done
  fi
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
  if [ -n "${TRAIN_STEP:-}" ]; then
    # Issue 20's iteration: `lab bench train-step` at batch 32, 640, fp16 three times and fp32 once (JSON under
    # $OUT, the medians printed), then fp16 runs with --kernels (the launch timeline as launched) and
    # --kernels-alone (each launch's own time).
    model=.device/shared/assets/models/yolo26n.pt
    for run in 1 2 3 fp32; do
      precision=fp16 && [ $run = fp32 ] && precision=fp32
      step lab bench train-step --model $model --batch 32 --precision $precision --iters 20 --warmup 3 --json \
        > "$out/train-step-$run.json"
      grep -E '"(device|iteration_ms|iteration_min_ms|accumulate_ms|step_ms)"' "$out/train-step-$run.json"
    done
    for profile in kernels kernels-alone; do
      STEP_TIMEOUT=${STEP_TIMEOUT:-300} step lab bench train-step --model $model --batch 32 --precision fp16 \
        --iters 3 --warmup 1 --$profile --json > "$out/train-step-$profile.json"
      gzip -f "$out/train-step-$profile.json"
    done
    step python3 bench/launch_profiles.py "$out/train-step-kernels.json.gz" "$out/train-step-kernels-alone.json.gz"
  fi
  if [ -n "${TRAIN_AB:-}" ]; then
    # The fp16 iteration of `lab` and of each BASELINE_LAB binary in turn, TRAIN_AB rounds (an A/B in one run:
    # alternating spreads a drifting clock over both); JSON under $OUT, the medians printed.
    model=.device/shared/assets/models/yolo26n.pt
    for round in $(seq "$TRAIN_AB"); do
      for bin in lab ${BASELINE_LAB:-}; do
        name=$(basename "$bin")
        STEP_TIMEOUT=${STEP_TIMEOUT:-300} step "$repo/.device/bin/$name" bench train-step --model $model --batch 32 \
          --precision fp16 --iters 20 --warmup 3 --json > "$out/train-ab-$name-$round.json"
        echo "$name round $round: $(grep -E '"iteration_(min_)?ms"' "$out/train-ab-$name-$round.json" | tr -d '\n ')"
      done
    done
  fi
  if [ -n "${SANITIZE:-}" ]; then
    # compute-sanitizer's memcheck, racecheck and synccheck over each `lab run` line of the SANITIZE file
    # (scripts/sanitize/*.txt; # comments), with each binary SANITIZE_BINS names (default `lab`; BASELINE_LAB's
    # are packed beside it): one line a run, its exit status and the tool's summary.
    [ -f "$SANITIZE" ] || echo "SANITIZE: no file $SANITIZE"
    [ -f "$SANITIZE" ] && for tool in memcheck racecheck synccheck; do
      grep -v '^#' "$SANITIZE" | while read -r args; do
        for bin in ${SANITIZE_BINS:-lab}; do
          result=$(timeout "${STEP_TIMEOUT:-240}" compute-sanitizer --tool $tool --error-exitcode 9 \
            "$repo/.device/bin/$bin" run $args --backend cuda 2>&1 < /dev/null)
          echo "$tool $bin $args: exit $? $(echo "$result" | grep -E '^(PASS|FAIL)$|SUMMARY' | tr '\n' ' ')"
        done
      done
    done
  fi
  if [ -n "${TORCH_TRAIN:-}" ]; then
    # The PyTorch training iteration beside `lab bench train-step` (bench/torch_train_step.py): its checks on
    # bus.jpg first, then batch 32 and 1, SGD and AdamW, fp32 / TF32 / AMP, lab fp32 and fp16 in the same run;
    # TORCH_TRAIN=compile then also times batch 32 AdamW AMP through torch.compile (minutes of compiling);
    # TORCH_TRAIN=batch32 times only issue 20's row (batch 32, AdamW, AMP and fp32: about two minutes).
    model=.device/shared/assets/models/yolo26n.pt
    step lab convert $model /tmp/yolo26n.safetensors
    rows=() && [ "$TORCH_TRAIN" = batch32 ] && rows=(--batches 32 --optimizers AdamW --precisions amp,fp32 --reps 10)
    STEP_TIMEOUT=${STEP_TIMEOUT:-600} step python3 bench/torch_train_step.py --weights /tmp/yolo26n.safetensors \
      --goldens .device/shared/assets/goldens --lab .device/bin/lab --model $model "${rows[@]}"
    [ "$TORCH_TRAIN" = compile ] && STEP_TIMEOUT=${STEP_TIMEOUT:-900} step python3 bench/torch_train_step.py \
      --weights /tmp/yolo26n.safetensors --goldens .device/shared/assets/goldens --batches 32 --optimizers AdamW \
      --precisions amp --compile max-autotune-no-cudagraphs
  fi
  if [ -n "${TORCH_PT:-}" ]; then
    # The state-dict .pt we write, loaded by real torch (weights_only=True) and compared with its safetensors twin;
    # TORCH_PT=DIR also checks DIR/last.pt and DIR/best.pt (a training run's weights/ folder) the same way.
    model=.device/shared/assets/models/yolo26n.pt
    step lab convert $model /tmp/yolo26n-state.pt
    step lab convert $model /tmp/yolo26n-state.safetensors
    step python3 scripts/check-pt-with-torch.py /tmp/yolo26n-state.pt /tmp/yolo26n-state.safetensors
    for stem in last best; do
      [ -f "$TORCH_PT/$stem.pt" ] && step python3 scripts/check-pt-with-torch.py "$TORCH_PT/$stem.pt" "$TORCH_PT/$stem.safetensors"
    done
  fi
  if [ -n "${COLD_START:-}" ]; then
    # lab detect on bus.jpg from an empty compile cache, then warm, per precision (-v: compile time per module).
    model=.device/shared/assets/models/yolo26n.pt
    for p in fp32 tf32 fp16 bf16; do
      cache=$(mktemp -d)
      for run in cold warm; do
        t0=$(date +%s.%N)
        LAB_CACHE_DIR=$cache lab detect .device/shared/assets/images/bus.jpg --backend cuda --precision $p \
          --model $model --nosave -v > "$out/cold-$p-$run.log" 2>&1
        rc=$?
        echo "cold start: $p $run $(awk "BEGIN {print $(date +%s.%N) - $t0}") s (exit $rc)"
      done
      grep -i "compile" "$out/cold-$p-cold.log" | tail -4
    done
  fi
  if [ -n "${VIEWER_CHILD:-}" ]; then
    # The viewer's pipeline child on cuda: a clean run, then a max-pool edited to read address 16.
    export LAB_MODEL=.device/shared/assets/models/yolo26n.pt
    rm -rf /tmp/vk && cp -r kernels /tmp/vk
    step lab-viewer --pipeline-child docs/viewer/scene.png --executor cuda --result-dir /tmp/vc1 --kernels-dir /tmp/vk
    head -c 700 /tmp/vc1/summary.json; echo
    sed -i '22i if (p == 0) src = (const float*)16;' /tmp/vk/nn/maxpool2d.cu
    step lab-viewer --pipeline-child docs/viewer/scene.png --executor cuda --result-dir /tmp/vc2 --kernels-dir /tmp/vk
    cat /tmp/vc2/summary.json; echo
  fi
  if [ -n "${FOLDER:-}" ]; then
    # lab detect on a folder of JPEGs (FOLDER_COPIES copies of each sample image): throughput per precision,
    # batch size, device set and JPEG encoder (--encode nvjpeg: nvJPEG on the GPU), with -v's stage
    # profile; each run twice, the first warming the compile cache. FOLDER_ARGS ('|' between runs) replaces
    # the list of configurations.
    model=.device/shared/assets/models/yolo26n.pt
    rm -rf /tmp/folder && mkdir -p /tmp/folder
    for i in $(seq -w 1 ${FOLDER_COPIES:-128}); do
      cp .device/shared/assets/images/bus.jpg /tmp/folder/bus_$i.jpg
      cp .device/shared/assets/images/zidane.jpg /tmp/folder/zidane_$i.jpg
    done
    IFS='|' read -ra folder_args <<< "${FOLDER_ARGS:-"--batch 1|--batch 32|--batch 32 --precision tf32|\
--batch 32 --precision fp16|--batch 1 --devices ${DEVICES:-0}|--batch 32 --devices ${DEVICES:-0}|\
--batch 32 --precision fp16 --encode nvjpeg"}"
    for args in "${folder_args[@]}"; do
      for run in warm-up measured; do
        echo "--- $run"
        step bash -c "lab detect /tmp/folder --backend cuda --model $model $args -v --out /tmp/folder-out | tail -7"
      done
    done
  fi
} 2>&1 | tee "$out/device.log"
[ -d "$LAB_CACHE_DIR" ] && tar -czf "$out/lab-cache.tgz" -C "$(dirname "$LAB_CACHE_DIR")" "$(basename "$LAB_CACHE_DIR")"
