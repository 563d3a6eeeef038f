#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""DDP trains the same small MLP for 50 steps with the mixccl backend and with gloo, in one run:
the losses must agree within float tolerance and, after training with mixccl, every rank must hold
bitwise the same parameters. Then 12 steps each with DDP's fp16 and PowerSGD communication hooks
(PowerSGD's callbacks issue collectives and wait for them), ZeroRedundancyOptimizer against gloo,
and a Join over uneven inputs. The group is made with an explicit TCPStore (not env://). Prints the
median step time of each backend (small buckets, so gradient buckets overlap with backward).

usage: ddp_test.py NPROCS
"""
import os
import statistics
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

torch, dist, torch_mixccl = harness.import_or_skip()

if not harness.is_rank():
    harness.run_ranks(__file__, int(sys.argv[1]), timeout=240)

from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

RANK = int(os.environ["RANK"])
N = int(os.environ["WORLD_SIZE"])
STEPS = 50
torch.set_num_threads(1)

store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), N, RANK == 0,
                      timeout=timedelta(seconds=60))
dist.init_process_group("mixccl", store=store, rank=RANK, world_size=N, timeout=timedelta(seconds=60))
gloo = dist.new_group(backend="gloo")


def train(group, steps=STEPS, hook=None, hook_state=None):
    torch.manual_seed(1234 + RANK)  # different on each rank: DDP's initial broadcast must fix it
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256), torch.nn.Tanh(),
                                torch.nn.Linear(256, 1))
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.1)  # several buckets
    if hook is not None:
        ddp.register_comm_hook(hook_state(group) if hook_state else group, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses, times = [], []
    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * step + RANK)
        x = torch.randn(64, 32, generator=g)
        y = torch.sin(x.sum(1, keepdim=True))
        start = time.perf_counter()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return torch.tensor(losses), torch.cat([p.detach().flatten() for p in model.parameters()]), times


loss_m, params_m, times_m = train(dist.group.WORLD)
loss_g, params_g, times_g = train(gloo)
ok = True
if not torch.allclose(loss_m, loss_g, rtol=1e-4, atol=1e-6):
    print(f"[rank {RANK}] FAIL: losses differ, max |diff| {(loss_m - loss_g).abs().max():.3g}\n"
          f"mixccl {loss_m[:5].tolist()}...\ngloo   {loss_g[:5].tolist()}...", flush=True)
    ok = False
if loss_m[-10:].mean() >= loss_m[:10].mean():
    print(f"[rank {RANK}] FAIL: the loss did not fall: {loss_m.tolist()}", flush=True)
    ok = False
# Bitwise: every rank's parameters against rank 0's (moved over gloo, so mixccl cannot hide a bug).
everyone = [torch.empty_like(params_m) for _ in range(N)]
dist.all_gather(everyone, params_m, group=gloo)
for r in range(N):
    if not torch.equal(everyone[r].view(torch.int32), everyone[0].view(torch.int32)):
        print(f"[rank {RANK}] FAIL: rank {r}'s parameters differ from rank 0's after mixccl training", flush=True)
        ok = False
if not torch.allclose(params_m, params_g, rtol=1e-3, atol=1e-5):
    print(f"[rank {RANK}] FAIL: mixccl and gloo parameters differ by {(params_m - params_g).abs().max():.3g}")
    ok = False
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook  # noqa: E402
from torch.distributed.algorithms.join import Join  # noqa: E402
from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: E402


def powersgd_state(group):
    return powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=2, start_powerSGD_iter=3)


for name, hook, state in (("fp16", default_hooks.fp16_compress_hook, None),
                          ("PowerSGD", powerSGD_hook.powerSGD_hook, powersgd_state)):
    loss_hm = train(dist.group.WORLD, 12, hook, state)[0]
    loss_hg = train(gloo, 12, hook, state)[0]
    if not torch.allclose(loss_hm, loss_hg, rtol=1e-3, atol=1e-5):
        print(f"[rank {RANK}] FAIL: {name} hook: losses differ from gloo's\nmixccl {loss_hm.tolist()}\n"
              f"gloo   {loss_hg.tolist()}", flush=True)
        ok = False

# ZeroRedundancyOptimizer: each rank steps its shard of Adam's state and broadcasts its shard of
# the parameters (broadcasts from every root, consolidate_state_dict's object collectives).
def train_zero(group):
    torch.manual_seed(7)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)])
    ddp = DDP(model, process_group=group)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, process_group=group, lr=0.01)
    g = torch.Generator().manual_seed(RANK)
    losses = []
    for _ in range(10):
        loss = ddp(torch.randn(8, 16, generator=g)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    opt.consolidate_state_dict(to=0)
    return torch.tensor(losses)


loss_zm, loss_zg = train_zero(dist.group.WORLD), train_zero(gloo)
if not torch.allclose(loss_zm, loss_zg, rtol=1e-4, atol=1e-6):
    print(f"[rank {RANK}] FAIL: ZeroRedundancyOptimizer: losses differ from gloo's\nmixccl {loss_zm.tolist()}\n"
          f"gloo   {loss_zg.tolist()}", flush=True)
    ok = False

# Join: ranks run different numbers of steps; the ranks that finish early shadow the others'
# all-reduces until everyone is done.
joined = DDP(torch.nn.Linear(8, 1))
with Join([joined]):
    for _ in range(4 + 3 * RANK):
        joined(torch.randn(4, 8)).sum().backward()

skip = 5  # first steps include DDP's lazy set-up
print(f"[rank {RANK}] {'ok' if ok else 'FAILED'}: loss {loss_m[0]:.4f} -> {loss_m[-1]:.4f} (gloo {loss_g[-1]:.4f}); "
      f"median step mixccl {statistics.median(times_m[skip:]) * 1e3:.2f} ms, "
      f"gloo {statistics.median(times_g[skip:]) * 1e3:.2f} ms", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
