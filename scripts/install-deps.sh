#!/usr/bin/env bash
# Installs the Debian packages the lab needs, only those missing. Idempotent; root or sudo.
set -euo pipefail
packages=(cmake ninja-build g++ make pkg-config libcli11-dev catch2 libtomlplusplus-dev nlohmann-json3-dev
  libboost-context-dev libstb-dev libjpeg62-turbo-dev libzip-dev libcurl4-openssl-dev libimgui-dev libglfw3-dev xvfb xauth)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "install-deps: the CUDA 13 toolkit is expected in /usr/local/cuda (NVRTC headers and libraries)" >&2
  exit 2
fi
