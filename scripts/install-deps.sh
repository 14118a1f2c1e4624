#!/usr/bin/env bash
# Installs the Debian packages the lab needs, only those missing, and nvdisasm (for `lab source --sass`), which
# Debian does not package: from NVIDIA's nvidia-cuda-nvdisasm wheel on PyPI, linked into the toolkit's bin/;
# nvJPEG (for `lab detect --encode nvjpeg`; loaded at run time) from the nvidia-nvjpeg wheel, whose
# header the build needs; and, for the tests only, pycocotools from PyPI into a folder of its own.
# Idempotent; root or sudo.
set -euo pipefail
packages=(cmake ninja-build g++ make pkg-config libcli11-dev catch2 libtomlplusplus-dev nlohmann-json3-dev
  libboost-context-dev libstb-dev libjpeg62-turbo-dev libzip-dev libcurl4-openssl-dev libyaml-cpp-dev libimgui-dev libglfw3-dev fonts-dejavu-core xvfb xauth
  libplplot-dev  # PLplot draws lab train's results.png (its mem device and Hershey fonts ship in libplplot17)
  strace)  # strace: the atomic-write test watches the fsync/rename order with it
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "install-deps: the CUDA 13 toolkit is expected in /usr/local/cuda (NVRTC headers and libraries)" >&2
  exit 2
fi
nvdisasm_dir=/opt/nvidia-cuda-nvdisasm
if [ ! -x /usr/local/cuda/bin/nvdisasm ]; then
  echo "install-deps: installing nvdisasm (PyPI nvidia-cuda-nvdisasm, CUDA 13) into $nvdisasm_dir"
  "${sudo[@]}" python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --upgrade \
    --target "$nvdisasm_dir" "nvidia-cuda-nvdisasm>=13.2,<14"
  "${sudo[@]}" ln -sf "$nvdisasm_dir/nvidia/cu13/bin/nvdisasm" /usr/local/cuda/bin/nvdisasm
fi
# nvJPEG: Debian packages no CUDA 13 nvJPEG; the wheel holds nvidia/cu13/include/nvjpeg.h and
# nvidia/cu13/lib/libnvjpeg.so.13 (pinned to 13.0 to match the CUDA 13.0 toolkit). CMake finds the header there
# (LAB_NVJPEG_ROOT) and records the library's path as lab's default.
nvjpeg_dir=/opt/nvidia-nvjpeg
if [ ! -f "$nvjpeg_dir/nvidia/cu13/include/nvjpeg.h" ] || [ ! -f "$nvjpeg_dir/nvidia/cu13/lib/libnvjpeg.so.13" ]; then
  echo "install-deps: installing nvJPEG (PyPI nvidia-nvjpeg, CUDA 13.0) into $nvjpeg_dir"
  "${sudo[@]}" python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --upgrade \
    --target "$nvjpeg_dir" "nvidia-nvjpeg>=13.0,<13.1"
fi
# Test-only: pycocotools (and the numpy it needs), which Debian does not package, from PyPI into a folder of
# its own; tests/test_metrics_coco.cpp runs tests/coco_eval.py with PYTHONPATH set to it.
pycocotools_dir=/opt/lab-pycocotools
if ! PYTHONPATH="$pycocotools_dir" python3 -c "import pycocotools.cocoeval" >/dev/null 2>&1; then
  echo "install-deps: installing pycocotools (PyPI, test-only) into $pycocotools_dir"
  "${sudo[@]}" python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --upgrade \
    --target "$pycocotools_dir" "pycocotools==2.0.11"
fi
