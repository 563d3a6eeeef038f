# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""dist.all_reduce of float32 through mixccl and through gloo, interleaved in one run.

Two processes on this host (127.0.0.1), malloc'd CPU tensors as torch allocates them, the same
timing loop for both backends: per size and round, each backend in turn (the order alternates per
round) runs all_reduce back to back until at least --min-seconds passed, after a barrier, and the
mean time per call gives the bus bandwidth (2 (n-1)/n bytes / time, nccl-tests' definition).
Prints per size the median and range over rounds for each backend and the median of the per-round
ratios.

    PYTHONPATH=build/python /usr/bin/python3 torch/examples/bench_allreduce.py [--rounds 5]
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def timed(group, tensor, min_seconds):
    dist.barrier(group=group)
    dist.all_reduce(tensor, group=group)  # warm-up
    dist.barrier(group=group)
    calls, start = 0, time.perf_counter()
    while True:
        dist.all_reduce(tensor, group=group)
        calls += 1
        elapsed = time.perf_counter() - start
        # Both ranks must run the same number of calls: rank 0 decides, everyone follows.
        if calls % 4 == 0:
            flag = torch.tensor([1 if elapsed >= min_seconds else 0], dtype=torch.int32)
            dist.broadcast(flag, 0, group=group)
            if flag.item():
                break
    return (time.perf_counter() - start) / calls


def worker(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch_mixccl  # noqa: F401  registers "mixccl"
    dist.init_process_group("mixccl", rank=rank, world_size=world)
    groups = {"mixccl": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    sizes = []
    s = args.min_bytes
    while s <= args.max_bytes:
        sizes.append(s)
        s *= 4
    factor = 2 * (world - 1) / world
    if rank == 0:
        print(f"# all_reduce float32, {world} processes, {args.rounds} rounds, >= {args.min_seconds} s per cell")
        print(f"# {'bytes':>10} {'mixccl busbw GB/s':>24} {'gloo busbw GB/s':>24} {'ratio':>7}")
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32)
        bw = {"mixccl": [], "gloo": []}
        ratios = []
        for r in range(args.rounds):
            order = ["mixccl", "gloo"] if r % 2 == 0 else ["gloo", "mixccl"]
            got = {}
            for name in order:
                seconds = timed(groups[name], t, args.min_seconds)
                got[name] = factor * size / seconds / 1e9
                bw[name].append(got[name])
            ratios.append(got["mixccl"] / got["gloo"])
        if rank == 0:
            cell = lambda v: f"{statistics.median(v):7.3f} [{min(v):6.3f}-{max(v):6.3f}]"  # noqa: E731
            print(f"  {size:>10} {cell(bw['mixccl']):>24} {cell(bw['gloo']):>24} {statistics.median(ratios):6.2f}x",
                  flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-seconds", type=float, default=0.2)
    p.add_argument("--min-bytes", type=int, default=4096)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--world", type=int, default=2)
    args = p.parse_args()
    port = 29500 + os.getpid() % 2000
    mp.spawn(worker, args=(args.world, args, port), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
