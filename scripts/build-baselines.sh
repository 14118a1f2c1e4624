#!/usr/bin/env bash
# Builds `lab` at each revision named on the command line (branches, tags, commits) in one git worktree beside
# this checkout, which stays untouched, and copies each binary to $OUT/lab-<revision> for pack-device.sh's
# BASELINE_LAB (device-run.sh's TRAIN_AB and bench steps then time them beside this checkout's `lab`).
# The worktree and its build folder are kept, so each further revision builds incrementally.
#   scripts/build-baselines.sh prio dgrad-epi
#   BASELINE_LAB="$(ls /tmp/lab-baselines/lab-*)" scripts/pack-device.sh build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/lab-baselines}
# Beside this checkout, so that its ../shared/assets (compiled into the binaries) is this checkout's.
worktree=${WORKTREE:-$(dirname "$root")/lab-baselines-worktree}
if [ $# -eq 0 ]; then
  echo "usage: scripts/build-baselines.sh REVISION [REVISION ...]" >&2
  exit 2
fi
for rev in "$@"; do
  git -C "$root" rev-parse --verify --quiet "$rev^{commit}" > /dev/null ||
    { echo "build-baselines: '$rev' names no commit of $root" >&2; exit 2; }
done
mkdir -p "$out"
if [ ! -e "$worktree/.git" ]; then git -C "$root" worktree add --quiet --detach "$worktree" "$1"; fi
[ -f "$worktree/build/build.ninja" ] || cmake -S "$worktree" -B "$worktree/build" -G Ninja > /dev/null
for rev in "$@"; do
  git -C "$worktree" checkout --quiet --detach "$(git -C "$root" rev-parse "$rev^{commit}")"
  ninja -C "$worktree/build" lab > /dev/null
  name=lab-$(echo "$rev" | tr -c 'A-Za-z0-9._\n-' '-')
  cp "$worktree/build/lab/lab" "$out/$name.tmp" && mv "$out/$name.tmp" "$out/$name"
  echo "$out/$name: $rev ($(git -C "$worktree" rev-parse --short HEAD))"
done
