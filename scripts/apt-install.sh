#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Sourced helper: apt_install_missing LABEL PACKAGE... installs the Debian packages not yet
# installed (apt-get as root, or through sudo), quietly and without prompts; idempotent.
apt_install_missing() {
  local label=$1
  shift
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "$label: all packages present"
    return 0
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "$label: installing ${missing[*]}"
  $sudo apt-get update -qq
  # iperf3's postinst asks whether to start a daemon; answer no (harmless for other packages).
  echo "iperf3 iperf3/start_daemon boolean false" | $sudo debconf-set-selections 2>/dev/null || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
