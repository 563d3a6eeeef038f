#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""mixccl groups under a gloo world: they cannot be split from a mixccl parent, so their members
meet through the store (origin "store"), each under its own prefix.

usage: gloo_world_test.py NPROCS   (launches NPROCS ranks of itself)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

torch, dist, torch_mixccl = harness.import_or_skip()

if not harness.is_rank():
    harness.run_ranks(__file__, int(sys.argv[1]), timeout=120)

RANK = int(os.environ["RANK"])
N = int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")
ok = True
for members in (list(range(N)), list(range(1, N)), list(range(N))):
    sub = dist.new_group(members, backend="mixccl")
    if RANK not in members:
        continue
    t = torch.full((7,), float(RANK))
    dist.all_reduce(t, group=sub)
    want = float(sum(members))
    if sub.origin != "store" or not torch.equal(t, torch.full((7,), want)):
        print(f"[rank {RANK}] FAIL: group {members}: origin {sub.origin}, sum {t[0].item()}, want {want}", flush=True)
        ok = False
dist.barrier()
dist.destroy_process_group()
print(f"[rank {RANK}] {'all checks passed' if ok else 'FAILED'}", flush=True)
sys.exit(0 if ok else 1)
