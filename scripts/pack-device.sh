#!/usr/bin/env bash
# Packs what a GPU run needs into .device/ (ignored by git): the built binaries, the shared libraries the GPU
# machine lacks, and the shared assets the tests read (never committed); then gzips it into .device.tgz, which the
# device tool carries (the folder itself is past the 64 MiB carry limit) and device-run.sh unpacks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$root/.device
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib" "$out/shared/assets"
cp "$build/lab/lab" "$build/tests/lab_tests" "$out/bin/"
# The viewer binary (when built) for its --pipeline-child mode, which opens no window: only with PACK_VIEWER=1
# (device-run.sh's VIEWER_CHILD step), since it and its X11/GL libraries push the folder past the 64 MiB carry limit.
if [ -n "${PACK_VIEWER:-}" ] && [ -x "$build/viewer/lab-viewer" ]; then cp "$build/viewer/lab-viewer" "$out/bin/"; fi
# Baseline `lab` binaries built from other commits, for A/B benchmarks: BASELINE_LAB="path ..." (distinct names).
for baseline in ${BASELINE_LAB:-}; do cp "$baseline" "$out/bin/"; done
strip --strip-debug "$out/bin/"*  # debug info would not fit the 64 MiB carry limit
# Every library outside glibc, libstdc++, libgcc and CUDA: the GPU machine (Ubuntu 24.04) lacks libzip, libstb and
# may lack libcurl's dependency set; libraries built against Debian 12's older glibc run on its newer one.
for lib in $(ldd "$out/bin/"* | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*|libresolv*|libnvrtc*|libcuda*|libnvJitLink*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
# nvJPEG (lab detect --encode nvjpeg) is opened at run time, so ldd does not list it; the GPU machine
# may lack it (the build's LAB_NVJPEG_ROOT has it): device-run.sh's LD_LIBRARY_PATH finds this copy by the loader's search.
nvjpeg_root=$(sed -n 's/^LAB_NVJPEG_ROOT:PATH=//p' "$build/CMakeCache.txt")
cp -L "$nvjpeg_root/lib/libnvjpeg.so.13" "$out/lib/"
# PLplot (lab train's results.png) loads its mem driver at run time from PLPLOT_DRV_DIR and its Hershey fonts and
# default palettes from PLPLOT_LIB: device-run.sh points both at these copies.
plplot_version=$(pkg-config --modversion plplot)
mkdir -p "$out/lib/plplot/drivers" "$out/share/plplot"
cp "$(pkg-config --variable=drvdir plplot)/"mem.{so,driver_info} "$out/lib/plplot/drivers/"
cp "/usr/share/plplot$plplot_version/"{plstnd5.fnt,plxtnd5.fnt,cmap0_default.pal,cmap1_default.pal} "$out/share/plplot/"
assets=$root/../shared/assets
mkdir -p "$out/shared/assets/goldens" "$out/shared/assets/images" "$out/shared/assets/models"
cp "$assets/README.md" "$out/shared/assets/"
cp "$assets"/goldens/{bus_loss_golden.safetensors,bus_loss.json,bus_labels.txt,bus_detections.json,bus_train_golden.json,bus_train_golden.safetensors} \
  "$out/shared/assets/goldens/"
cp "$assets"/goldens/bus640_golden_0.safetensors "$assets"/goldens/bus640_golden_2.safetensors "$out/shared/assets/goldens/"
cp "$assets"/images/*.jpg "$out/shared/assets/images/"
cp "$assets"/models/yolo26n.pt "$out/shared/assets/models/"
du -sh "$out"
# PACK_EXCLUDE="glob ..." leaves matching paths out of the tarball, to fit a call's carry beside
# .lab-cache.tgz: the training calls (TRAIN_STEP, TORCH_TRAIN) need neither 'bus640_golden_2*' nor
# 'bus_loss_golden*', but bench/torch_train_step.py reads bus640_golden_0 (bus.jpg's golden input).
read -ra globs <<< "${PACK_EXCLUDE:-}"
excludes=() && for glob in "${globs[@]}"; do excludes+=(--exclude="$glob"); done
tar -C "$root" -czf "$root/.device.tgz" "${excludes[@]}" .device
ls -la "$root/.device.tgz"
