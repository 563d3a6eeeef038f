#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
#
# usage: run_client_mixed.sh CLIENT WORKDIR PATTERN...
# Runs the mixed-vendor client (client_mixed.c) once per backend pattern (the first is the
# reference, e.g. H,H,H,H) and requires every hash file to equal the first one, i.e. every case
# leaves bit-for-bit the same buffers on every rank whatever the mix of vendors. Exit 77 (CTest
# skip) when the machine has no OpenCL platform.
set -u
client=$1
work=$2
shift 2
[ $# -ge 2 ] || { echo "need at least two patterns" >&2; exit 2; }
"$client" --probe-opencl
probe=$?
if [ $probe -eq 77 ]; then
  echo "SKIP: no OpenCL platform found (install pocl-opencl-icd)"
  exit 77
fi
[ $probe -eq 0 ] || { echo "client_mixed --probe-opencl failed ($probe)" >&2; exit 2; }
mkdir -p "$work" || exit 2
ref=
for pattern in "$@"; do
  out="$work/hashes_$(echo "$pattern" | tr -d ,).txt"
  rm -f "$out"
  "$client" --backends "$pattern" --hash-out "$out" --timeout 300 || {
    echo "FAIL: client_mixed --backends $pattern exited with $?" >&2
    exit 1
  }
  lines=$(wc -l < "$out")
  [ "$lines" -gt 0 ] || { echo "FAIL: $out is empty" >&2; exit 1; }
  if [ -z "$ref" ]; then
    ref=$out
    echo "reference $pattern: $lines hashes"
    continue
  fi
  if cmp -s "$ref" "$out"; then
    echo "$pattern: $lines hashes, identical to the reference"
  else
    echo "FAIL: $pattern differs from the reference in $(diff "$ref" "$out" | grep -c '^>') of $lines cases:" >&2
    diff "$ref" "$out" | head -40 >&2
    exit 1
  fi
done
exit 0
