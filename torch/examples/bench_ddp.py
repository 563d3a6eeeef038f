# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Time of one DDP training step with the mixccl backend and with gloo, interleaved in one run.

Two processes on this host, the model of tests/torch/ddp_test.py (an MLP of about 75k
parameters, gradient buckets of 0.1 MB so several all-reduces overlap backward), one torch
thread per rank. Per round and backend (order alternating), after 5 untimed steps, steps run for
at least --min-seconds; the median step time of each round is kept. Prints the median and range
over rounds and the median of the per-round ratios.

    PYTHONPATH=build/python /usr/bin/python3 torch/examples/bench_ddp.py [--rounds 7]
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def make(group, rank):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256), torch.nn.Tanh(),
                                torch.nn.Linear(256, 1))
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.1)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)


def step(ddp, opt, rank, i):
    g = torch.Generator().manual_seed(1000 * i + rank)
    x = torch.randn(64, 32, generator=g)
    loss = torch.nn.functional.mse_loss(ddp(x), torch.sin(x.sum(1, keepdim=True)))
    opt.zero_grad()
    loss.backward()
    opt.step()


def timed(group, rank, min_seconds):
    ddp, opt = make(group, rank)
    for i in range(5):
        step(ddp, opt, rank, i)
    dist.barrier(group=group)
    times, i, start = [], 5, time.perf_counter()
    while True:
        t0 = time.perf_counter()
        step(ddp, opt, rank, i)
        times.append(time.perf_counter() - t0)
        i += 1
        if len(times) % 8 == 0:  # rank 0 decides when to stop, so both run the same steps
            flag = torch.tensor([1 if time.perf_counter() - start >= min_seconds else 0], dtype=torch.int32)
            dist.broadcast(flag, 0, group=group)
            if flag.item():
                return statistics.median(times)


def worker(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    import torch_mixccl  # noqa: F401  registers "mixccl"
    dist.init_process_group("mixccl", rank=rank, world_size=world)
    groups = {"mixccl": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    got = {"mixccl": [], "gloo": []}
    ratios = []
    for r in range(args.rounds):
        this = {}
        for name in (["mixccl", "gloo"] if r % 2 == 0 else ["gloo", "mixccl"]):
            this[name] = timed(groups[name], rank, args.min_seconds)
            got[name].append(this[name])
        ratios.append(this["mixccl"] / this["gloo"])
    if rank == 0:
        cell = lambda v: f"{statistics.median(v) * 1e3:.2f} ms [{min(v) * 1e3:.2f}-{max(v) * 1e3:.2f}]"  # noqa: E731
        print(f"DDP step, {world} processes, {args.rounds} rounds: mixccl {cell(got['mixccl'])}, "
              f"gloo {cell(got['gloo'])}, mixccl/gloo time {statistics.median(ratios):.2f}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--min-seconds", type=float, default=1.0)
    p.add_argument("--world", type=int, default=2)
    args = p.parse_args()
    mp.spawn(worker, args=(args.world, args, 29500 + os.getpid() % 2000), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
