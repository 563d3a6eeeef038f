#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# CTest check of examples/mixed_mlp (label device): with the partition fixed by --shares, a run
# with OpenCL ranks (0 and 2 of 3) produces the same loss curve and the same weight hashes, bit
# for bit, as an all-host run; the loss goes down; and a run that sizes shares by measured speed
# splits the whole batch and keeps the ranks' weights equal. Exits 77 (skip) when no OpenCL
# device is usable.
#   mixed_mlp_check.sh MIXCCLRUN MIXED_MLP
set -u
run=$1
bin=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fail() {
  echo "FAIL: $*"
  for f in "$out"/*.txt; do
    echo "---- $(basename "$f")"
    cat "$f"
  done
  exit 1
}

MIXCCL_DEVICE_BACKEND=opencl "$bin" --probe-opencl || exit $?

# Small model, few steps, uneven shares (so every rank has a different PreMulSum scalar).
args=(--steps 6 --batch 48 --in 8 --hidden 16 --out 2 --lr 0.1 --shares 10,23,15 --check-every 2)
"$run" -np 3 --timeout 120 -- "$bin" "${args[@]}" >"$out/host.txt" 2>&1 || fail "all-host run exited $?"
"$run" -np 3 --timeout 120 --rank-env 0,2 MIXCCL_DEVICE_BACKEND=opencl -- "$bin" "${args[@]}" >"$out/mixed.txt" 2>&1 ||
  fail "mixed run exited $?"

grep -q 'rank 0 opencl 10, rank 1 host 23, rank 2 opencl 15' "$out/mixed.txt" ||
  fail "the mixed run did not report OpenCL ranks 0 and 2 with the fixed shares"
grep -q 'rank 0 host 10, rank 1 host 23, rank 2 host 15' "$out/host.txt" || fail "the all-host run's partition"
grep -E '^(step|weights)' "$out/host.txt" >"$out/host.curve"
grep -E '^(step|weights)' "$out/mixed.txt" >"$out/mixed.curve"
[ "$(grep -c '^step' "$out/host.curve")" = 6 ] || fail "expected 6 loss lines"
[ "$(grep -c '^weights equal' "$out/host.curve")" = 3 ] || fail "expected 3 weight checks"
diff "$out/host.curve" "$out/mixed.curve" >"$out/diff.txt" || fail "mixed loss curve differs from all-host"
first=$(awk '/^step/ {print $4; exit}' "$out/host.curve")
last=$(awk '/^step/ {v = $4} END {print v}' "$out/host.curve")
awk -v a="$first" -v b="$last" 'BEGIN {exit !(b < a)}' || fail "loss did not decrease ($first -> $last)"

# Measured shares: three warm-up steps, then training; the shares must cover the batch exactly.
"$run" -np 3 --timeout 120 --rank-env 1 MIXCCL_DEVICE_BACKEND=opencl -- "$bin" --steps 4 --batch 50 --in 8 \
  --hidden 16 --out 2 --check-every 2 >"$out/measured.txt" 2>&1 || fail "measured-shares run exited $?"
line=$(grep '^partition (measured)' "$out/measured.txt") || fail "no measured partition line"
sum=$(echo "$line" | grep -oE '(host|opencl) [0-9]+' | awk '{s += $2} END {print s}')
[ "$sum" = 50 ] || fail "measured shares sum to $sum, not the batch of 50"
grep -q '^throughput: ' "$out/measured.txt" || fail "no throughput line"
echo "mixed loss curve equals the all-host one bit for bit ($first -> $last); measured shares: ${line#*: }"
