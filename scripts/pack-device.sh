#!/usr/bin/env bash
# Packs what a GPU run needs into .device/ (ignored by git, carried by the device tool): the built binaries,
# the shared libraries the GPU machine lacks, and the shared assets the tests read (never committed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$root/.device
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib" "$out/shared/assets"
cp "$build/lab/lab" "$build/tests/lab_tests" "$out/bin/"
strip --strip-debug "$out/bin/lab" "$out/bin/lab_tests"  # debug info would not fit the 64 MiB carry limit
# Libraries outside glibc/libstdc++/CUDA that the GPU machine (Ubuntu 24.04, CUDA 13) does not have.
for lib in $(ldd "$out/bin/lab" "$out/bin/lab_tests" | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libboost*|libzip*|libtomlplusplus*|libglfw*|libimgui*|libstb*) cp -L "$lib" "$out/lib/" ;;
  esac
done
assets=$root/../shared/assets
mkdir -p "$out/shared/assets/goldens" "$out/shared/assets/images" "$out/shared/assets/models"
cp "$assets/README.md" "$out/shared/assets/"
cp "$assets"/goldens/{bus_loss_golden.safetensors,bus_loss.json,bus_labels.txt,bus_detections.json} \
  "$out/shared/assets/goldens/"
cp "$assets"/images/*.jpg "$out/shared/assets/images/"
du -sh "$out"
