#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# The main job: installs dependencies, builds, and runs a 2-rank all-reduce over local shared
# memory (two processes), printing the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec "${BUILD_DIR:-build}/examples/allreduce_example" 2
