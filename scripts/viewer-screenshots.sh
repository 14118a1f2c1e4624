#!/bin/sh
# Regenerates the screenshots of docs/viewer.md: runs viewer/screenshots.script in lab-viewer under Xvfb, on a
# scratch copy of the kernel tree (the script edits kernels) with its own settings folder; then
# viewer/screenshots_train.script (the Train panel) in the scratch folder, on a synthetic dataset that
# `lab data synth` writes there, with a fresh copy of the kernel tree.
# Usage: scripts/viewer-screenshots.sh [BUILD_DIR]   (default: build)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
build=$(cd "$build" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$repo/kernels" "$scratch/kernels"
cd "$repo"
xvfb-run -a -s '-screen 0 1600x1000x24' "$build/viewer/lab-viewer" --script "$repo/viewer/screenshots.script" \
  --screenshot-dir "$repo/docs/viewer" --kernels-dir "$scratch/kernels" --config-dir "$scratch/config" \
  --width 1600 --height 1000
cd "$scratch"
"$build/lab/lab" data synth synth --classes 3 --train 8 --val 4 --imgsz 96 --seed 3 > /dev/null
cp -r "$repo/kernels" "$scratch/train-kernels"
xvfb-run -a -s '-screen 0 1600x1000x24' "$build/viewer/lab-viewer" \
  --script "$repo/viewer/screenshots_train.script" --screenshot-dir "$repo/docs/viewer" \
  --kernels-dir "$scratch/train-kernels" --config-dir "$scratch/config" --width 1600 --height 1000
echo "screenshots in $repo/docs/viewer"
