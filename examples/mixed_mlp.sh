#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Heterogeneous training efficiency of examples/mixed_mlp, as FlagScale defines it: the mixed
# run's throughput as a percentage of the sum of the throughputs the two kinds of rank reach on
# their own. Runs, with the same options:
#   1. all-host   with as many ranks as the mixed run has host ranks,
#   2. all-OpenCL with as many ranks as the mixed run has OpenCL ranks,
#   3. mixed      (-np N, OpenCL on the ranks of --opencl-ranks), given 1. and 2. as baselines.
# --same-np runs both baselines with N ranks instead (then 100% means the mixed run is as fast as
# the two full-size homogeneous runs together, so expect about half of that).
#
#   examples/mixed_mlp.sh [-np N] [--opencl-ranks 1,3] [--build DIR] [--same-np] [-- mixed_mlp options]
set -euo pipefail
np=4
ocl=""
build=build
same=0
while [ $# -gt 0 ]; do
  case $1 in
    -np) np=$2; shift 2 ;;
    --opencl-ranks) ocl=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --same-np) same=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '4,13p' "$0"; exit 0 ;;
    *) echo "mixed_mlp.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
run=$build/perf/mixcclrun
bin=$build/examples/mixed_mlp
for f in "$run" "$bin"; do
  [ -x "$f" ] || { echo "mixed_mlp.sh: $f not found; build the mixcclrun and mixed_mlp targets (or pass --build)" >&2; exit 2; }
done
if [ -z "$ocl" ]; then  # default: the odd ranks
  ocl=$(seq 1 2 $((np - 1)) | paste -sd, -)
fi
nocl=$(echo "$ocl" | tr ',' '\n' | grep -c .)
nhost=$((np - nocl))
if [ "$nocl" -lt 1 ] || [ "$nhost" -lt 1 ]; then
  echo "mixed_mlp.sh: the mixed run needs host and OpenCL ranks (-np $np, --opencl-ranks '$ocl')" >&2
  exit 2
fi
MIXCCL_DEVICE_BACKEND=opencl "$bin" --probe-opencl >/dev/null || { echo "mixed_mlp.sh: no usable OpenCL device" >&2; exit 1; }
[ "$same" = 1 ] && { hostnp=$np; oclnp=$np; } || { hostnp=$nhost; oclnp=$nocl; }

throughput() {  # the samples/s of one run (its output goes to stderr)
  local out
  out=$("$run" "$@") || { echo "$out" >&2; echo "mixed_mlp.sh: run failed: $run $*" >&2; exit 1; }
  echo "$out" >&2
  echo "$out" | awk '/^throughput:/ {print $2}'
}

echo "== all-host, $hostnp ranks" >&2
x=$(throughput -np "$hostnp" -- "$bin" "$@")
echo "== all-OpenCL, $oclnp ranks" >&2
y=$(throughput -np "$oclnp" -x MIXCCL_DEVICE_BACKEND=opencl -- "$bin" "$@")
echo "== mixed, $np ranks, OpenCL on ranks $ocl" >&2
out=$("$run" -np "$np" --rank-env "$ocl" MIXCCL_DEVICE_BACKEND=opencl -- "$bin" "$@" --baseline-host "$x" \
  --baseline-opencl "$y") || { echo "$out" >&2; echo "mixed_mlp.sh: the mixed run failed" >&2; exit 1; }
echo "$out" >&2
echo "$out" | grep '^efficiency:'
