#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Every operation of the mixccl backend against gloo (same inputs, same run) and against a
reference computed locally from every rank's inputs (each rank can regenerate them all), for the
dtypes and operators gloo lacks. Integers must match exactly, floats within their dtype's tolerance.

usage: ops_test.py NPROCS   (launches NPROCS ranks of itself; init through env://, as torchrun)
"""
import os
import sys
import time
import traceback
import zlib
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

torch, dist, torch_mixccl = harness.import_or_skip()

if not harness.is_rank():
    harness.run_ranks(__file__, int(sys.argv[1]), timeout=240)

RANK = int(os.environ["RANK"])
N = int(os.environ["WORLD_SIZE"])
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int8, torch.uint8, torch.int32, torch.int64)
failures = []


def make(r, dtype, shape, tag, kind="any"):
    """Rank r's input for check `tag`: the same on every rank that asks."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{tag}/{r}".encode()))  # hash() differs per process
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        if kind == "prod":  # near 1, so products stay well scaled
            return (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    lo, hi = (0, 4) if dtype == torch.uint8 else (-3, 4)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def all_inputs(dtype, shape, tag, kind="any", ranks=None):
    return [make(r, dtype, shape, tag, kind) for r in (range(N) if ranks is None else ranks)]


def reduce_ref(tensors, op, dtype):
    wide = torch.stack([t.to(torch.float64 if dtype.is_floating_point else torch.int64) for t in tensors])
    if op == "sum":
        out = wide.sum(0)
    elif op == "prod":
        out = wide.prod(0)
    elif op == "min":
        out = wide.min(0).values
    elif op == "max":
        out = wide.max(0).values
    elif op == "avg":
        out = wide.sum(0) / len(tensors)
    return out.to(dtype)


def same(got, want, what):
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(f"{what}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}")
    if got.dtype.is_floating_point or got.dtype.is_complex:
        tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(got.dtype, 1e-5)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=lambda m: f"{what}: {m}")
    elif not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.flatten()[:8].tolist()}, want {want.flatten()[:8].tolist()}")


def check(fn):
    name = fn.__name__
    try:
        fn()
    except Exception:
        failures.append(name)
        print(f"[rank {RANK}] FAILED {name}:\n{traceback.format_exc()}", flush=True)
    return fn


dist.init_process_group("mixccl", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))  # env://, as under torchrun
gloo = dist.new_group(backend="gloo")
assert dist.get_backend() == "mixccl", dist.get_backend()
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}


@check
def all_reduce_ops_dtypes():
    for dtype in FLOATS + INTS:
        for name, op in OPS.items():
            tag = f"ar-{dtype}-{name}"
            mine = all_inputs(dtype, (1000,), tag, kind=name)
            t = mine[RANK].clone()
            dist.all_reduce(t, op=op)
            same(t, reduce_ref(mine, name, dtype), tag)
            if dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.int8, torch.uint8):
                ref = mine[RANK].clone()
                dist.all_reduce(ref, op=op, group=gloo)
                same(t, ref, tag + " vs gloo")


@check
def all_reduce_avg_and_premul_sum():
    for dtype in FLOATS:
        mine = all_inputs(dtype, (777,), f"avg-{dtype}")
        t = mine[RANK].clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        same(t, reduce_ref(mine, "avg", dtype), f"avg {dtype}")
        ref = mine[RANK].clone()
        if dtype in (torch.float32, torch.float64):
            dist.all_reduce(ref, group=gloo)
            same(t, ref / N, f"avg {dtype} vs gloo sum / n")
        t = mine[RANK].clone()
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.5))
        same(t, reduce_ref([x.double() * 2.5 for x in mine], "sum", torch.float64).to(dtype), f"premul_sum {dtype}")
    # A factor given as a one-element tensor.
    mine = all_inputs(torch.float32, (64,), "premul-tensor")
    t = mine[RANK].clone()
    dist.all_reduce(t, op=dist._make_nccl_premul_sum([torch.tensor([0.5])]))
    same(t, reduce_ref(mine, "sum", torch.float32) * 0.5, "premul_sum tensor factor")


@check
def all_reduce_bool():
    mine = all_inputs(torch.bool, (500,), "bool")
    for name, want in (("sum", torch.stack(mine).any(0)), ("max", torch.stack(mine).any(0)),
                       ("prod", torch.stack(mine).all(0)), ("min", torch.stack(mine).all(0))):
        t = mine[RANK].clone()
        dist.all_reduce(t, op=OPS[name])
        same(t, want, f"bool {name}")


@check
def all_reduce_coalesced():
    # torch 1.13 wants one dtype per call.
    a = all_inputs(torch.float32, (300,), "coal-a")
    b = all_inputs(torch.float32, (17, 3), "coal-b")
    ts = [a[RANK].clone(), b[RANK].clone()]
    dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX)
    same(ts[0], reduce_ref(a, "max", torch.float32), "coalesced a")
    same(ts[1], reduce_ref(b, "max", torch.float32), "coalesced b")
    refs = [a[RANK].clone(), b[RANK].clone()]
    dist.all_reduce_coalesced(refs, op=dist.ReduceOp.MAX, group=gloo)
    same(ts[0], refs[0], "coalesced a vs gloo")
    same(ts[1], refs[1], "coalesced b vs gloo")


@check
def all_gather_list_and_tensor():
    # int16 and complex64 have no mixccl type: they travel as bytes.
    for dtype in (torch.float32, torch.int64, torch.int16, torch.complex64, torch.bool, torch.bfloat16):
        mine = all_inputs(dtype, (5, 7), f"ag-{dtype}")
        outs = [torch.empty(5, 7, dtype=dtype) for _ in range(N)]
        dist.all_gather(outs, mine[RANK])
        for r in range(N):
            same(outs[r], mine[r], f"all_gather {dtype} from {r}")
        flat = torch.empty(N * 5, 7, dtype=dtype)
        dist.all_gather_into_tensor(flat, mine[RANK])
        same(flat, torch.cat(mine), f"all_gather_into_tensor {dtype}")
        if dtype in (torch.float32, torch.int64):
            ref = [torch.empty(5, 7, dtype=dtype) for _ in range(N)]
            dist.all_gather(ref, mine[RANK], group=gloo)
            for r in range(N):
                same(outs[r], ref[r], f"all_gather {dtype} vs gloo")


@check
def reduce_scatter_list_and_tensor():
    # gloo has no reduce_scatter in torch 1.13: the local reference only.
    for dtype, name in ((torch.float32, "sum"), (torch.int64, "max"), (torch.bfloat16, "sum")):
        per = [all_inputs(dtype, (33,), f"rs-{dtype}-{p}") for p in range(N)]  # per[p][r]: r's block for p
        out = torch.empty(33, dtype=dtype)
        dist.reduce_scatter(out, [per[p][RANK] for p in range(N)], op=OPS[name])
        same(out, reduce_ref(per[RANK], name, dtype), f"reduce_scatter {dtype}")
        out2 = torch.empty(33, dtype=dtype)
        dist.reduce_scatter_tensor(out2, torch.cat([per[p][RANK] for p in range(N)]), op=OPS[name])
        same(out2, reduce_ref(per[RANK], name, dtype), f"reduce_scatter_tensor {dtype}")


def splits(r, p):
    return (r + 2 * p) % 3  # rows rank r sends to rank p; 0 happens


@check
def all_to_all_single_equal_and_uneven():
    for dtype in (torch.float32, torch.int32, torch.int16):
        mine = all_inputs(dtype, (N * 4, 3), f"a2a-{dtype}")
        out = torch.empty(N * 4, 3, dtype=dtype)
        dist.all_to_all_single(out, mine[RANK])
        want = torch.cat([mine[p][RANK * 4:(RANK + 1) * 4] for p in range(N)])
        same(out, want, f"all_to_all_single equal {dtype}")
        if dtype != torch.int16:
            ref = torch.empty_like(out)
            dist.all_to_all_single(ref, mine[RANK], group=gloo)
            same(out, ref, f"all_to_all_single equal {dtype} vs gloo")
    # Uneven: rank r's input holds splits(r, p) rows for each p, in order.
    rows = {r: [splits(r, p) for p in range(N)] for r in range(N)}
    ins = [make(r, torch.float64, (sum(rows[r]), 5), "a2a-uneven") for r in range(N)]
    in_splits = rows[RANK]
    out_splits = [rows[p][RANK] for p in range(N)]
    out = torch.empty(sum(out_splits), 5, dtype=torch.float64)
    dist.all_to_all_single(out, ins[RANK], out_splits, in_splits)
    want = torch.cat([ins[p][sum(rows[p][:RANK]):sum(rows[p][:RANK + 1])] for p in range(N)])
    same(out, want, "all_to_all_single uneven")
    ref = torch.empty_like(out)
    dist.all_to_all_single(ref, ins[RANK], out_splits, in_splits, group=gloo)
    same(out, ref, "all_to_all_single uneven vs gloo")


@check
def all_to_all_list():
    ins = [make(RANK, torch.int64, (p + 1, 2), f"a2al-{p}") for p in range(N)]
    outs = [torch.empty(RANK + 1, 2, dtype=torch.int64) for _ in range(N)]
    outs[RANK] = torch.empty(2, RANK + 1, dtype=torch.int64)  # counts must match, shapes need not (as from peers)
    dist.all_to_all(outs, ins)
    for p in range(N):
        same(outs[p].reshape(RANK + 1, 2), make(p, torch.int64, (RANK + 1, 2), f"a2al-{RANK}"),
             f"all_to_all list from {p}")


@check
def broadcast_reduce_gather_scatter_every_root():
    for root in range(N):
        mine = all_inputs(torch.float32, (2, 50), f"bc-{root}")
        t = mine[RANK].clone()
        dist.broadcast(t, src=root)
        same(t, mine[root], f"broadcast root {root}")
        ref = mine[RANK].clone()
        dist.broadcast(ref, src=root, group=gloo)
        same(t, ref, f"broadcast root {root} vs gloo")

        ints = all_inputs(torch.int64, (40,), f"red-{root}")
        t = ints[RANK].clone()
        dist.reduce(t, dst=root)
        if RANK == root:
            same(t, reduce_ref(ints, "sum", torch.int64), f"reduce root {root}")
            ref = ints[RANK].clone()
        else:
            ref = ints[RANK].clone()
        dist.reduce(ref, dst=root, group=gloo)
        if RANK == root:
            same(t, ref, f"reduce root {root} vs gloo")

        outs = [torch.empty(2, 50) for _ in range(N)] if RANK == root else None
        dist.gather(mine[RANK], outs, dst=root)
        if RANK == root:
            for r in range(N):
                same(outs[r], mine[r], f"gather root {root} from {r}")

        chunks = [make(root, torch.int32, (9,), f"sc-{root}-{p}") for p in range(N)]
        out = torch.empty(9, dtype=torch.int32)
        dist.scatter(out, chunks if RANK == root else None, src=root)
        same(out, chunks[RANK], f"scatter root {root}")
        ref = torch.empty(9, dtype=torch.int32)
        dist.scatter(ref, chunks if RANK == root else None, src=root, group=gloo)
        same(out, ref, f"scatter root {root} vs gloo")


@check
def send_recv():
    nxt, prv = (RANK + 1) % N, (RANK - 1) % N
    # A ring of small messages, both queued before either is waited for.
    t = make(RANK, torch.float32, (256,), "p2p")
    got = torch.empty(256)
    reqs = [dist.isend(t, nxt), dist.irecv(got, prv)]
    for r in reqs:
        r.wait()
    same(got, make(prv, torch.float32, (256,), "p2p"), "isend/irecv ring")
    # 4 MiB pairs, ordered so that neither side waits for the other (even ranks send first).
    big = make(RANK, torch.float32, (1 << 20,), "p2p-big")
    got = torch.empty(1 << 20)
    if N % 2 == 0:
        peer = RANK ^ 1
        if RANK % 2 == 0:
            dist.send(big, peer)
            dist.recv(got, peer)
        else:
            dist.recv(got, peer)
            dist.send(big, peer)
        same(got, make(peer, torch.float32, (1 << 20,), "p2p-big"), "send/recv 4 MiB")


@check
def async_work_and_futures():
    mine = [all_inputs(torch.float32, (4096,), f"async-{i}") for i in range(8)]
    ts = [m[RANK].clone() for m in mine]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    fut = works[-1].get_future()
    for w in works:
        w.wait()
        assert w.is_completed() and w.is_success()
    for i, t in enumerate(ts):
        same(t, reduce_ref(mine[i], "sum", torch.float32), f"async all_reduce {i}")
    same(fut.wait()[0], ts[-1], "future value")
    dist.barrier()


@check
def clear_errors():
    def raises(fn, words, what):
        try:
            fn()
        except RuntimeError as e:
            if words not in str(e):
                raise AssertionError(f"{what}: message lacks '{words}': {e}")
            return
        raise AssertionError(f"{what}: no exception")

    raises(lambda: dist.all_reduce(torch.ones(4, 4).t()), "not contiguous", "non-contiguous")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "cannot be reduced", "int16")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND), "bitwise", "BAND")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG), "bool", "bool AVG")
    # A PREMUL_SUM factor tensor of two elements: refused at the call (it once failed on the worker,
    # which made the group unusable).
    raises(lambda: dist.all_reduce(torch.ones(4), op=dist._make_nccl_premul_sum([torch.tensor([1.0, 2.0])])),
           "one element", "PREMUL_SUM factor of 2 elements")
    # Equal splits are rows of dim 0, as with torch's own backends (these once went out split mid-row).
    raises(lambda: dist.all_to_all_single(torch.empty(2 * N + 1, 2), torch.ones(2 * N + 1, 2)), "does not divide",
           "all_to_all_single rows")
    # This rank's own block disagrees: refused at the call (these once failed on the worker, which
    # made the group unusable).
    outs = [torch.empty(2) for _ in range(N)]
    outs[RANK] = torch.empty(3)
    raises(lambda: dist.all_to_all(outs, [torch.ones(2) for _ in range(N)]), "to itself", "all_to_all self")
    out_splits = [1] * N
    out_splits[RANK] = 2
    raises(lambda: dist.all_to_all_single(torch.empty(N + 1), torch.ones(N), out_splits, [1] * N), "to itself",
           "all_to_all_single self")
    # The group still works after refused calls (they never reached the communicator).
    t = torch.ones(3)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(N)), "after errors")


@check
def object_collectives_and_complex():
    # torch builds these on all_gather/broadcast/gather/scatter of byte tensors, and complex sums
    # on float views: what training scripts use for metadata and complex gradients.
    out = [None] * N
    dist.all_gather_object(out, {"rank": RANK, "pad": "x" * RANK})
    assert out == [{"rank": r, "pad": "x" * r} for r in range(N)], out
    objs = [("root", N - 1)] if RANK == N - 1 else [None]
    dist.broadcast_object_list(objs, src=N - 1)
    assert objs == [("root", N - 1)], objs
    got = [None] * N if RANK == 0 else None
    dist.gather_object(RANK * 10, got, dst=0)
    assert RANK != 0 or got == [r * 10 for r in range(N)], got
    one = [None]
    dist.scatter_object_list(one, [f"to {r}" for r in range(N)] if RANK == 0 else None, src=0)
    assert one == [f"to {RANK}"], one
    mine = all_inputs(torch.complex64, (33,), "complex")
    t = mine[RANK].clone()
    dist.all_reduce(t)
    same(t, torch.stack(mine).sum(0), "complex64 sum")


@check
def destroy_with_operations_in_flight():
    # Fire-and-forget operations (Work and tensor dropped at once, as DDP drops its buckets'),
    # then the group is destroyed from Python while they run: the destructor holds the GIL and
    # joins the worker, which needs the GIL to drop the last reference to each tensor. Hung every
    # time before the destructor let go of the GIL.
    for _ in range(2):
        sub = dist.new_group(list(range(N)))
        for _ in range(4):
            dist.all_reduce(torch.ones(1 << 20), group=sub, async_op=True)  # Work dropped at once
        dist.destroy_process_group(sub)
        del sub


@check
def callbacks_that_issue_and_wait():
    # Rank 0 attaches its callbacks while the operations wait for the late ranks, so they run on
    # the group's worker: one issues an all_reduce and waits on its future (DDP's PowerSGD hook
    # does that), one waits through Work.wait() for an all_reduce queued behind the one whose
    # completion ran it. Both used to wait forever there. The call order is a, nested, b on every
    # rank wherever the callbacks run.
    import threading
    main = threading.get_ident()
    ran_on = []

    def issue_and_wait(fut):
        ran_on.append(threading.get_ident())
        u = torch.full((5,), float(RANK))
        return dist.all_reduce(u, async_op=True).get_future().wait()[0] + fut.value()[0]

    def wait_for_later(fut):
        ran_on.append(threading.get_ident())
        later.wait()
        return b.clone()

    if RANK != 0:
        time.sleep(0.3)
    a, b = torch.ones(5), torch.full((5,), 2.0)
    work_a = dist.all_reduce(a, async_op=True)
    # Attached before anything else is queued, as DDP attaches its hooks' callbacks: if `a` is
    # done already the callback runs here and its all_reduce still comes right after `a`.
    f1 = work_a.get_future().then(issue_and_wait)
    later = dist.all_reduce(b, async_op=True)
    f2 = work_a.get_future().then(wait_for_later)  # issues nothing: its order does not matter
    total = float(sum(range(N)))
    same(f1.wait(), torch.full((5,), total + N), "a callback's own all_reduce")
    same(f2.wait(), torch.full((5,), 2.0 * N), "a callback waiting for a later Work")
    if RANK == 0:
        assert all(t != main for t in ran_on), "rank 0's callbacks ran on the calling thread: not the case tested"


@check
def a_callback_drops_the_last_reference_to_its_group():
    # The group's destructor then runs on the group's own worker thread, inside the callback: it
    # must leave the teardown to the worker instead of joining the thread it runs on.
    sub = dist.new_group(list(range(N)))
    box = [sub]
    if RANK != 0:
        time.sleep(0.3)
    t = torch.ones(3)
    work = dist.all_reduce(t, group=sub, async_op=True)

    def drop(fut):
        box.clear()
        return fut.value()[0] * 2

    fut = work.get_future().then(drop)
    dist.destroy_process_group(sub)
    del sub
    same(fut.wait(), torch.full((3,), 2.0 * N), "the callback's result")
    t = torch.ones(3)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(N)), "the world afterwards")


@check
def integer_avg_truncates():
    # NCCL's ncclAvg on integers: the sum divided by the rank count, rounded toward zero.
    for dtype in (torch.int32, torch.int64):
        mine = all_inputs(dtype, (301,), f"iavg-{dtype}")
        t = mine[RANK].clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        want = torch.div(reduce_ref(mine, "sum", torch.int64), N, rounding_mode="trunc").to(dtype)
        same(t, want, f"avg {dtype}")


def use_subgroup(sub, members, tag):
    """all_reduce and broadcast on `sub` (ranks `members` of the world), checked on its members."""
    if RANK not in members:
        return
    assert dist.get_world_size(sub) == len(members) and dist.get_rank(sub) == members.index(RANK), tag
    mine = all_inputs(torch.int64, (21,), tag, ranks=members)
    t = mine[members.index(RANK)].clone()
    dist.all_reduce(t, group=sub)
    same(t, reduce_ref(mine, "sum", torch.int64), f"{tag} all_reduce")
    b = mine[members.index(RANK)].clone()
    dist.broadcast(b, src=members[-1], group=sub)  # src is a world rank
    same(b, mine[-1], f"{tag} broadcast")


@check
def new_group_of_every_rank_is_a_split():
    sub = dist.new_group(list(range(N)))
    assert sub.origin == "split", sub.origin
    use_subgroup(sub, list(range(N)), "split")


@check
def new_groups_of_some_ranks_are_shrinks():
    # Made in turn on their members only (torch 1.13 calls the creator on members alone), with
    # overlapping and disjoint member sets: each is shrunk from the world's communicator.
    sets = {2: [[0], [1], [0]], 3: [[0, 1], [0, 2], [1, 2], [2], [0, 1]]}.get(
        N, [[0, 1], [0, 2], [2, 3], [1, 2, 3], [0, 1]])
    groups = []
    for members in sets:
        sub = dist.new_group(members)
        if RANK in members:
            assert sub.origin == "shrink", sub.origin
        groups.append(sub)
    # Used after all were made, newest first, and interleaved with the world.
    for members, sub in reversed(list(zip(sets, groups))):
        use_subgroup(sub, members, f"shrink {members}")
        t = torch.ones(5)
        dist.all_reduce(t)
        same(t, torch.full((5,), float(N)), f"world after shrink {members}")
    dist.barrier()


dist.destroy_process_group()
if failures:
    print(f"[rank {RANK}] {len(failures)} checks failed: {failures}", flush=True)
    sys.exit(1)
print(f"[rank {RANK}] all checks passed", flush=True)
