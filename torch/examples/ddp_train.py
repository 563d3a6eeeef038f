#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""A DDP training script that knows mixccl only by its import and backend name.

    torchrun --nproc_per_node 2 -r 1 -t 1 --log_dir /tmp/trlogs torch/examples/ddp_train.py

(with PYTHONPATH holding build/python, or <libdir>/mixccl/python once installed). Exits non-zero
unless the loss falls and every rank ends with the same parameters.
"""
import os

import torch
import torch.distributed as dist
import torch_mixccl  # noqa: F401  (registers the "mixccl" backend)
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mixccl")  # rank, size and rendezvous from torchrun's environment
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)  # DDP broadcasts rank 0's initial parameters
model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
first = last = None
for step in range(int(os.environ.get("STEPS", "50"))):
    x = torch.randn(32, 16)
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True) * 0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    first = loss.item() if first is None else first
    last = loss.item()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
copies = [torch.empty_like(flat) for _ in range(world)]
dist.all_gather(copies, flat)
same = all(torch.equal(c, copies[0]) for c in copies)
print(f"rank {rank}/{world}: loss {first:.4f} -> {last:.4f}, parameters equal on all ranks: {same}", flush=True)
dist.destroy_process_group()
raise SystemExit(0 if same and last < first else 1)
