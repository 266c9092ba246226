#!/usr/bin/env bash
# Installs every Debian package Tessera's build, tests and benchmarks need.
# Idempotent: does nothing (no apt-get at all) when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  libgtest-dev libgmock-dev libbenchmark-dev
  libomp-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libhwloc-dev hwloc-nox libxxhash-dev libzstd-dev libssl-dev libpng-dev
  iproute2
  python3 python3-dev python3-numpy python3-torch libtorch-dev pybind11-dev python3-matplotlib
  libonnx-dev libprotobuf-dev libonnx-testdata python3-onnx
  openmpi-bin libopenmpi-dev libgloo-dev
  libopenblas0-pthread libblis4-openmp
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
