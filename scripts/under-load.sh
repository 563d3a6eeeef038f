#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Runs a command while LOAD_BUSY (default 2) busy loops compete for the cores, the way a shared CI
# machine does, and exits with the command's status. The multi-process suites must pass like
# this: a rank that loses its core for a while is slow, not wrong.
#
#   scripts/under-load.sh ctest --test-dir build -R 'client_np4$'
#   LOAD_RUNS=10 scripts/under-load.sh ctest --test-dir build -R 'client_np4$'   # 10 runs, counts passes
set -uo pipefail
busy=${LOAD_BUSY:-2}
runs=${LOAD_RUNS:-1}
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }

pids=()
stop_load() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=(); }
trap stop_load EXIT
trap 'stop_load; exit 130' INT TERM
for ((i = 0; i < busy; i++)); do
  # A shell loop, not `yes > /dev/null`: pure CPU with no I/O, like a compute job beside us.
  bash -c 'while :; do :; done' &
  pids+=($!)
done
echo "under-load: $busy busy loop(s) running (load average now: $(cut -d' ' -f1 /proc/loadavg))"

passed=0
status=0
for ((run = 1; run <= runs; run++)); do
  start=$SECONDS
  "$@"
  rc=$?
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); else status=$rc; fi
  echo "under-load: run $run/$runs exited $rc after $((SECONDS - start)) s"
done
echo "under-load: $passed of $runs run(s) passed with $busy busy loop(s)"
exit $status
