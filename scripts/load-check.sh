#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# The load check CI runs after the test command: the multi-process suites (label mp) and the
# 4-process ABI client, each with two busy loops competing for the cores (scripts/under-load.sh).
# A rank that loses its core must make the job slower, never wrong. Needs a built ${BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
LOAD_BUSY=${LOAD_BUSY:-2} bash scripts/under-load.sh ctest --test-dir "$build" --output-on-failure -j2 -L mp
LOAD_BUSY=${LOAD_BUSY:-2} bash scripts/under-load.sh ctest --test-dir "$build" --output-on-failure -R 'client_np4$'
