#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# The main job: installs dependencies, builds, and runs the nccl-tests-style all-reduce benchmark
# with 2 ranks (two processes on this host, so over shared memory), printing its table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build=${BUILD_DIR:-build}
exec "$build/perf/mixcclrun" -np 2 -- "$build/perf/all_reduce_perf" -b 8 -e 256M -f 4 "$@"
