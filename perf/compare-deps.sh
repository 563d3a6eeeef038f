#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Installs the Debian 12 packages that perf/compare and perf/plot need on top of
# scripts/install-deps.sh: two MPI implementations, gloo, iperf3 and gnuplot. Kept apart from
# install-deps.sh so that CI only pays for them when it runs the comparison. Idempotent; needs
# root (or sudo).
set -euo pipefail
packages=(
  libopenmpi-dev openmpi-bin
  mpich libmpich-dev
  libgloo-dev
  iperf3 gnuplot-nox python3
  build-essential cmake pkg-config
)
source "$(dirname "$0")/../scripts/apt-install.sh"
apt_install_missing compare-deps "${packages[@]}"
