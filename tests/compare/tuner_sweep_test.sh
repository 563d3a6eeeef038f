#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# perf/tuner-sweep on one small cell: it times the tuner and every all-reduce algorithm, names the
# tuner's pick (from the TUNING log) and the fastest, and writes both ratios.
# Usage: tuner_sweep_test.sh TUNER_SWEEP BUILD_DIR WORK_DIR
set -euo pipefail
sweep=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$sweep" --build-dir "$build" --ranks 2 --colls all_reduce --sizes 8 --reps 1 --min-seconds 0.01 \
  --json "$work/sweep.json" >"$work/out.txt"
cat "$work/out.txt"
python3 - "$work/sweep.json" <<'PY'
import json, math, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 1, rows
r = rows[0]
algos = [a for a in r["median_us"] if a != "tuner"]
for want in ("ring", "recursive-doubling", "one-shot"):
    assert want in algos, f"{want} was not timed: {algos}"
assert r["pick"] in algos, f"the tuner's pick {r['pick']!r} is not among the timed algorithms {algos}"
assert r["best"] == min(algos, key=lambda a: r["median_us"][a]), r
for k in ("tuner_over_best", "pick_over_best"):
    assert math.isfinite(r[k]) and r[k] > 0, (k, r[k])
print("tuner-sweep: ok,", r["pick"], "picked,", r["best"], "fastest")
PY
