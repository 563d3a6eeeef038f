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
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "compare-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "compare-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
# iperf3's postinst asks whether to start a daemon; answer no.
echo "iperf3 iperf3/start_daemon boolean false" | $SUDO debconf-set-selections 2>/dev/null || true
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
