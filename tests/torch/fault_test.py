#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Failures surface as Python exceptions within seconds instead of hangs.

  fault_test.py kill     3 ranks all-reduce in a loop; rank 2 kills itself with SIGKILL. Ranks 0
                         and 1 must raise within 15 s of their last completed operation, although
                         the group's timeout is 300 s: mixccl notices the dead peer.
  fault_test.py timeout  2 ranks, group timeout 3 s; rank 1 arrives 10 s late. Rank 0 must raise
                         a "timed out" error after 3 s and before rank 1 arrives; rank 1 then
                         must raise too (its peer gave up) instead of hanging.
  fault_test.py wait     2 ranks, group timeout 300 s; rank 1 arrives 10 s late. Rank 0's
                         Work.wait(timeout=2 s) must raise after 2 s, and its next operation at
                         once (the communicator was revoked); rank 1 must raise instead of hanging.
"""
import os
import signal
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

torch, dist, torch_mixccl = harness.import_or_skip()

MODE = sys.argv[1]
if not harness.is_rank():
    nprocs = 3 if MODE == "kill" else 2
    start = time.monotonic()
    codes = harness.wait_ranks(harness.start_ranks(__file__, nprocs, [MODE]), timeout=120, fail_fast=False)
    want = [0, 0, -signal.SIGKILL] if MODE == "kill" else [0, 0]
    print(f"{'PASS' if codes == want else 'FAIL'}: fault_test {MODE}: exit codes {codes}, expected {want} "
          f"({time.monotonic() - start:.1f} s)")
    sys.exit(0 if codes == want else 1)

RANK = int(os.environ["RANK"])
timeout_s = 3 if MODE == "timeout" else 300
dist.init_process_group("mixccl", timeout=timedelta(seconds=timeout_s))
t = torch.ones(1 << 18)

if MODE == "kill":
    last_ok = time.monotonic()
    try:
        for i in range(100000):
            if RANK == 2 and i == 20:
                os.kill(os.getpid(), signal.SIGKILL)
            dist.all_reduce(t)
            last_ok = time.monotonic()
    except RuntimeError as e:
        took = time.monotonic() - last_ok
        print(f"[rank {RANK}] raised {took:.1f} s after its last completed all_reduce: {e}", flush=True)
        sys.exit(0 if took < 15 else 1)
    print(f"[rank {RANK}] FAIL: no exception although rank 2 died", flush=True)
    sys.exit(1)

dist.all_reduce(t)  # both ranks are up
if MODE == "wait":
    if RANK == 1:
        time.sleep(10)
        try:
            dist.all_reduce(t)
        except RuntimeError as e:
            print(f"[rank 1] raised: {e}", flush=True)
            sys.exit(0)
        print("[rank 1] FAIL: no exception although rank 0 gave up", flush=True)
        sys.exit(1)
    work = dist.all_reduce(t, async_op=True)
    start = time.monotonic()
    try:
        work.wait(timeout=timedelta(seconds=2))
        print("[rank 0] FAIL: wait(timeout) returned although rank 1 was away", flush=True)
        sys.exit(1)
    except RuntimeError as e:
        took = time.monotonic() - start
        print(f"[rank 0] wait raised after {took:.1f} s: {e}", flush=True)
        ok = 1.5 <= took < 8 and "expired" in str(e)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        ok = False
    except RuntimeError as e:
        print(f"[rank 0] the next all_reduce raised after {time.monotonic() - start:.1f} s: {e}", flush=True)
        ok = ok and time.monotonic() - start < 1 and "revoked" in str(e)
    sys.exit(0 if ok else 1)

# timeout
if RANK == 1:
    time.sleep(10)
start = time.monotonic()
try:
    dist.all_reduce(t)
except RuntimeError as e:
    took = time.monotonic() - start
    print(f"[rank {RANK}] raised after {took:.1f} s: {e}", flush=True)
    if RANK == 0:
        sys.exit(0 if 2.5 <= took < 9 and "timed out" in str(e) else 1)
    sys.exit(0 if took < 30 else 1)
print(f"[rank {RANK}] FAIL: the late all_reduce did not raise", flush=True)
sys.exit(1)
