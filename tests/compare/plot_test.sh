#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Usage: plot_test.sh PATH/TO/perf/plot SCRATCH_DIR
# Checks perf/plot's exit codes on bad input and usage, and (when gnuplot exists) that it draws a
# PNG from two result files in the perf tools' JSON schema. Exits 77 (skipped) without gnuplot.
set -euo pipefail
plot=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"

expect() {  # expect CODE CMD...
  local want=$1 got=0
  shift
  "$@" >"$dir/out.txt" 2>&1 || got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: '$*' exited $got, expected $want:"
    cat "$dir/out.txt"
    exit 1
  fi
}

echo '{"tool":"x"}' >"$dir/no_rows.json"
echo 'not json' >"$dir/garbage.json"
echo '{"rows":[{"bytes":8,"oop":{"busbw":"fast"}}]}' >"$dir/bad_row.json"
echo '{"rows":[]}' >"$dir/empty.json"
expect 1 "$plot" -o "$dir/x.png" "$dir/no_rows.json"
expect 1 "$plot" -o "$dir/x.png" "$dir/garbage.json"
expect 1 "$plot" -o "$dir/x.png" "$dir/bad_row.json"
expect 1 "$plot" -o "$dir/x.png" "$dir/empty.json"
expect 1 "$plot" -o "$dir/x.png" "$dir/does_not_exist.json"
expect 2 "$plot" "$dir/empty.json"
expect 2 "$plot" -o "$dir/x.png" --size big "$dir/empty.json"

for t in shm tcp; do
  cat >"$dir/$t.json" <<JSON
{"tool":"all_reduce_perf","collective":"all_reduce","nranks":2,"host":"h","transport":"$t","env":{},
 "rows":[{"bytes":8,"count":2,"type":"float","redop":"sum","root":-1,
          "oop":{"time_us":5.0,"algbw":0.0016,"busbw":0.0016,"wrong":0},"ip":null},
         {"bytes":1048576,"count":262144,"type":"float","redop":"sum","root":-1,
          "oop":{"time_us":300.0,"algbw":3.5,"busbw":3.5,"wrong":0},"ip":null}],"avg_busbw":1.75}
JSON
done
# nccl-tests' layout (what the perf tools' -J writes), read through perf/perfjson.py.
cat >"$dir/nccltests.json" <<JSON
{"version":2,"config":{"devices":[{"rank":0},{"rank":1}]},
 "results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1",
             "out_of_place":{"time":5.0,"alg_bw":0.0016,"bus_bw":0.0016,"nwrong":0.0},"in_place":null},
            {"size":1048576,"count":262144,"type":"float","redop":"sum","root":"    -1",
             "out_of_place":{"time":300.0,"alg_bw":3.5,"bus_bw":3.5,"nwrong":0.0},"in_place":null}],
 "average_bus_bandwidth":{"bandwidth":1.75,"okay":"unchecked"},
 "mixccl":{"collective":"all_reduce","nranks":2,"transport":"shm"}}
JSON
echo '{"version":2,"results":[{"size":8,"root":"x"}]}' >"$dir/bad_root.json"
expect 1 "$plot" -o "$dir/x.png" "$dir/bad_root.json"
if ! command -v gnuplot >/dev/null; then
  echo "SKIP: gnuplot not installed (perf/compare-deps.sh); input checks passed"
  exit 77
fi
expect 0 "$plot" -o "$dir/chart.png" "$dir/shm.json" "$dir/tcp.json=tcp run"
expect 0 "$plot" -o "$dir/chart2.png" "$dir/nccltests.json" "$dir/tcp.json"
head -c 8 "$dir/chart.png" | od -An -c | grep -q 'P   N   G' || { echo "FAIL: chart.png is not a PNG"; exit 1; }
echo "perf_plot: OK"
