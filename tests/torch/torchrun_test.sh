#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# The acceptance run: torchrun starts 2 ranks of torch/examples/ddp_train.py, which knows mixccl
# only as `import torch_mixccl` and the backend name. Exits 77 (skipped) without torch.
# usage: torchrun_test.sh PYTHON EXAMPLE
set -uo pipefail
python=$1 example=$2
if ! "$python" -c "import torch, torch_mixccl" 2>/dev/null; then
  echo "SKIP: $python cannot import torch and torch_mixccl (scripts/install-deps.sh, scripts/build.sh)"
  exit 77
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# Debian's torchrun (1.13, Python 3.11) needs -r/-t/--log_dir (README, "Launching").
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 150 "$python" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" \
  -r 1 -t 1 --log_dir "$logs" "$example"
