#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Builds the libFuzzer targets (tests/fuzz/) with clang into ${FUZZ_BUILD_DIR:-build-fuzz} and
# runs each for ${FUZZ_SECONDS:-60} s, starting from a temporary copy of its seed corpus (so the
# repository is never written), FUZZ_JOBS (default: the core count) at a time. Exits non-zero if
# any target crashed, leaked, timed out or violated an invariant, and prints the input that did
# it. FUZZ_TARGETS="a b" runs only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
command -v clang++ >/dev/null || { echo "fuzz: clang++ is not installed (scripts/install-deps.sh)"; exit 1; }

mapfile -t all < <(cd tests/fuzz && ls fuzz_*.cc | sed 's/^fuzz_//; s/\.cc$//')
read -r -a targets <<<"${FUZZ_TARGETS:-${all[*]}}"

start=$(date +%s)
cmake -S . -B "$BUILD_DIR" -G Ninja -DMIXCCL_BUILD_TORCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DMIXCCL_FUZZ=ON -DMIXCCL_BUILD_TESTS=OFF -DMIXCCL_BUILD_PERF=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start)) s"

work=$(mktemp -d "${TMPDIR:-/tmp}/mixccl-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The targets' own log lines are noise here; a crash report is what matters.
unset NCCL_DEBUG NCCL_DEBUG_FILE NCCL_SHM_DISABLE
# One target: its log, artifacts and verdict stay in $work/$t.
run_one() {
  local t=$1
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  cp -r "tests/fuzz/corpus/$t/." "$work/$t/corpus/" 2>/dev/null || true
  # -timeout: an input running over 10 s is a hang; -rss_limit_mb: a bounded-length bug that
  # allocates what a peer asks shows up as an out-of-memory crash.
  if "$BUILD_DIR/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" >"$work/$t/log" 2>&1; then
    echo ok >"$work/$t/verdict"
  else
    echo failed >"$work/$t/verdict"
  fi
}

# Each fuzzer is one process on one core: FUZZ_JOBS (default: the core count) run side by side.
jobs_max=${FUZZ_JOBS:-$(nproc)}
running=0
for t in "${targets[@]}"; do
  echo "fuzz: running $t for ${SECONDS_EACH} s"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs_max" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=()
for t in "${targets[@]}"; do
  if [ "$(cat "$work/$t/verdict" 2>/dev/null)" != ok ]; then
    failed+=("$t")
    tail -n 60 "$work/$t/log"
    keep="${TMPDIR:-/tmp}/mixccl-fuzz-crash-$t-$$"
    mkdir -p "$keep"
    cp "$work/$t/artifacts/"* "$keep/" 2>/dev/null || true
    cp "$work/$t/log" "$keep/log"
    echo "fuzz: $t FAILED; crash input(s):"
    ls -1 "$keep"/* | grep -v '/log$' | sed 's/^/  /'
    echo "  reproduce: $BUILD_DIR/tests/fuzz/fuzz_$t <input>"
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+ *DONE" "$work/$t/log" | sed "s/^/fuzz: $t: /" || true
  fi
done
echo "fuzz: total $(($(date +%s) - start)) s"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${SECONDS_EACH} s without a crash"
