#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""all_reduce_perf on OpenCL memory (-m): every element checked (-c 1) through the nccl-tests output
reader, with ranks as processes under mixcclrun (-m opencl, -m H,O) and as threads of one process
(-t 2 -m opencl), plus every type and op once on a mixed pair. The device lines must name the memory
each rank used. Exits 77 (ctest: skipped) with the reason when no OpenCL platform is present.
Usage: opencl_test.py BINDIR MIXCCLRUN"""
import ctypes
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccltests_output  # noqa: E402

BIN = sys.argv[1]
MIXCCLRUN = sys.argv[2]
TOOL = os.path.join(BIN, "all_reduce_perf")
# A launcher's or the caller's backend choice would override the tool's own -m selection.
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMI_", "PMIX_", "SLURM_", "MASTER_", "NCCL_COMM_ID", "MIXCCL_DEVICE_BACKEND"))
         and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}


def opencl_platforms():
    """Number of OpenCL platforms the ICD loader finds (0 when there is no loader)."""
    try:
        lib = ctypes.CDLL("libOpenCL.so.1")
    except OSError:
        return 0
    n = ctypes.c_uint(0)
    if lib.clGetPlatformIDs(0, None, ctypes.byref(n)) != 0:
        return 0
    return n.value


failures = []


def run(name, cmd, banks, rows):
    """Runs cmd; expects exit 0, `rows` rows all checked with 0 wrong, and device lines whose [bus]
    fields are `banks` (one per rank, in rank order)."""
    p = subprocess.run(cmd, env=CLEAN, capture_output=True, text=True, timeout=240)
    problem = None
    if p.returncode != 0:
        problem = f"exit status {p.returncode}"
    else:
        try:
            res = nccltests_output.parse(p.stdout)
        except nccltests_output.FormatError as e:
            res, problem = None, f"output format: {e}"
        if res is not None:
            got_banks = [d["bus"] for d in sorted(res["devices"], key=lambda d: d["rank"])]
            wrong = [(r["size"], r["type"], r["redop"], r["oop_wrong"], r["ip_wrong"]) for r in res["rows"]
                     if r["oop_wrong"] != 0 or r["ip_wrong"] != 0]
            if got_banks != banks:
                problem = f"device lines name {got_banks}, expected {banks}"
            elif len(res["rows"]) != rows:
                problem = f"{len(res['rows'])} rows, expected {rows}"
            elif wrong:
                problem = f"rows with wrong or unchecked elements: {wrong[:5]}"
            elif res["oob"] != (0, True):
                problem = f"footer says {res['oob']}"
    if problem:
        failures.append(f"{name}: {problem}\ncommand: {' '.join(cmd)}\nstdout: {p.stdout[-2000:]}\n"
                        f"stderr: {p.stderr[-1500:]}")
    else:
        print(f"ok   {name}")


if opencl_platforms() == 0:
    print("SKIP: no OpenCL platform (install pocl-opencl-icd, or a vendor ICD)")
    sys.exit(77)

# 8 B .. 64 KiB by factors of 4: 7 rows, each out-of-place and in-place, every element checked.
sweep = ["-b", "8", "-e", "64K", "-f", "4", "-c", "1"]
run("mixcclrun -np 2 -m opencl", [MIXCCLRUN, "-np", "2", TOOL, "-m", "opencl"] + sweep, ["opencl"] * 2, 7)
run("mixcclrun -np 2 -m H,O", [MIXCCLRUN, "-np", "2", TOOL, "-m", "H,O"] + sweep, ["host", "opencl"], 7)
run("-t 2 -m opencl (threads share the backend)", [TOOL, "-t", "2", "-m", "opencl"] + sweep, ["opencl"] * 2, 7)
# Every type and op once (12 x 6 rows), O,H so the OpenCL rank is rank 0 this time.
run("mixcclrun -np 2 -m O,H -d all -o all",
    [MIXCCLRUN, "-np", "2", TOOL, "-m", "O,H", "-b", "1K", "-e", "1K", "-d", "all", "-o", "all", "-n", "2", "-w", "1"],
    ["opencl", "host"], 72)

if failures:
    print("FAIL " + "\nFAIL ".join(failures))
    sys.exit(1)
