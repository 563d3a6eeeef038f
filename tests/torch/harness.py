# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Shared by the torch_mixccl tests: skipping without torch, and launching ranks.

A test script is its own launcher: run without RANK in the environment it starts N copies of
itself as subprocesses with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), waits for them with a deadline and fails unless every rank exits 0.
"""
import os
import socket
import subprocess
import sys
import time

SKIP = 77  # CTest's SKIP_RETURN_CODE for these tests


def import_or_skip():
    """Returns (torch, torch.distributed, torch_mixccl), or exits 77 with the reason."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIP: torch is not importable by {sys.executable} ({e}); bash scripts/install-deps.sh installs it")
        sys.exit(SKIP)
    try:
        import torch_mixccl
    except ImportError as e:
        print(f"SKIP: torch_mixccl is not built ({e}); scripts/build.sh builds it where torch is installed")
        sys.exit(SKIP)
    return torch, dist, torch_mixccl


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(script, nprocs, args=(), extra_env=None):
    """Starts nprocs copies of script as ranks; returns the Popen objects."""
    port = free_port()
    procs = []
    for rank in range(nprocs):
        env = dict(os.environ)
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        env.update(extra_env or {})
        procs.append(subprocess.Popen([sys.executable, script, *args], env=env))
    return procs


def wait_ranks(procs, timeout, fail_fast=True):
    """Waits for every rank; kills all on the deadline, or as soon as one rank fails (its peers may
    be stuck in a gloo reference call that would wait for it until gloo's own timeout); with
    fail_fast False, only on the deadline (a test that kills a rank on purpose). Returns the exit
    codes (None: killed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes) or (fail_fast and any(c not in (None, 0) for c in codes)):
            break
        time.sleep(0.05)
    codes = [p.poll() for p in procs]
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    return codes


def run_ranks(script, nprocs, args=(), timeout=120, extra_env=None):
    """Launcher side: runs the ranks and exits 0 only when every rank exited 0."""
    start = time.monotonic()
    codes = wait_ranks(start_ranks(script, nprocs, args, extra_env), timeout)
    took = time.monotonic() - start
    if any(c != 0 for c in codes):
        print(f"FAIL: {os.path.basename(script)} {' '.join(args)} with {nprocs} ranks: exit codes {codes} "
              f"(None: killed, at the {timeout} s deadline or after another rank failed), {took:.1f} s")
        sys.exit(1)
    print(f"PASS: {os.path.basename(script)} {' '.join(args)} with {nprocs} ranks in {took:.1f} s")
    sys.exit(0)


def is_rank():
    return "RANK" in os.environ
