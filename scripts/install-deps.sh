#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Installs the Debian 12 packages mixccl builds and tests with. Idempotent; needs root (or sudo).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libspdlog-dev libfmt-dev libhwloc-dev libnuma-dev
  libgtest-dev libgmock-dev googletest
  libibverbs-dev librdmacm-dev
  binutils procps iproute2 clang-format
  clang libclang-rt-14-dev
  libcli11-dev nlohmann-json3-dev openmpi-bin python3 gnuplot-nox
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo
  python3-torch libtorch-dev python3-setuptools pybind11-dev python3-dev
)
source "$(dirname "$0")/apt-install.sh"
apt_install_missing install-deps "${packages[@]}"
