#!/usr/bin/env bash
# Packs what a GPU run needs into .device/ (ignored by git, carried by the device tool): the built binaries,
# the shared libraries the GPU machine lacks, and the shared assets the tests read (never committed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$root/.device
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib" "$out/shared/assets"
cp "$build/lab/lab" "$build/tests/lab_tests" "$out/bin/"
# The viewer binary (when built) for its --pipeline-child mode, which opens no window.
[ -x "$build/viewer/lab-viewer" ] && cp "$build/viewer/lab-viewer" "$out/bin/"
strip --strip-debug "$out/bin/"*  # debug info would not fit the 64 MiB carry limit
# Every library outside glibc, libstdc++, libgcc and CUDA: the GPU machine (Ubuntu 24.04) lacks libzip, libstb and
# may lack libcurl's dependency set; libraries built against Debian 12's older glibc run on its newer one.
for lib in $(ldd "$out/bin/"* | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*|libresolv*|libnvrtc*|libcuda*|libnvJitLink*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
assets=$root/../shared/assets
mkdir -p "$out/shared/assets/goldens" "$out/shared/assets/images" "$out/shared/assets/models"
cp "$assets/README.md" "$out/shared/assets/"
cp "$assets"/goldens/{bus_loss_golden.safetensors,bus_loss.json,bus_labels.txt,bus_detections.json} \
  "$out/shared/assets/goldens/"
cp "$assets"/goldens/bus640_golden_0.safetensors "$assets"/goldens/bus640_golden_2.safetensors "$out/shared/assets/goldens/"
cp "$assets"/images/*.jpg "$out/shared/assets/images/"
cp "$assets"/models/yolo26n.pt "$out/shared/assets/models/"
du -sh "$out"
