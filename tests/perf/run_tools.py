#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Runs mixccl's nccl-tests-compatible perf tools and checks their output with an nccl-tests
output reader (nccltests_output.py): exit status 0, '# Out of bounds values : 0 OK', no wrong
element on any row, the rows nccl-tests would print (sizes, counts, types, ops, roots), busbw
consistent with algbw and the collective's factor, and a positive average bus bandwidth.

  run_tools.py --bindir DIR --mode MODE --np N [--tools all_reduce,...] [--json] [--quick]

MODE says how the N ranks are started:
  threads       one process, -t N
  mixcclrun     mixcclrun -np N (--mixcclrun PATH)
  ompi-env      N processes given OMPI_COMM_WORLD_* by hand, NCCL_COMM_ID=127.0.0.1:<free port>
  slurm-env     N processes given SLURM_* by hand and no address: the tools derive the port
  pmi-env       N processes given PMI_RANK/PMI_SIZE/MPI_LOCALRANKID by hand, NCCL_COMM_ID set
  torchrun-env  N processes given RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT by hand
  mpirun        mpirun -np N (Open MPI), no extra environment; exit 77 (skip) without mpirun
"""
import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccltests_output  # noqa: E402

# perf/perfjson.py, the reader perf/compare and perf/plot use.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf"))
import perfjson  # noqa: E402

SKIP = 77
TYPES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
         "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
OPS = ["sum", "prod", "max", "min", "avg", "mulsum"]


def blocks(c, n, ts):
    """nccl-tests' split of c elements in n blocks: c / n rounded down to whole 16-byte units."""
    unit = 16 // ts
    per = c // n // unit * unit
    return per, per * n


def whole(c, n, ts):
    return c, c


# tool: (reduces, rooted, in-place checked, busbw factor(n), (param count, size in elements)(count, n, type size))
TOOLS = {
    "all_reduce": (True, False, True, lambda n: 2 * (n - 1) / n, whole),
    "all_gather": (False, False, True, lambda n: (n - 1) / n, blocks),
    "reduce_scatter": (True, False, True, lambda n: (n - 1) / n, blocks),
    "alltoall": (False, False, False, lambda n: (n - 1) / n, blocks),
    "broadcast": (False, True, True, lambda n: 1.0, whole),
    "reduce": (True, True, True, lambda n: 1.0, whole),
    "gather": (False, True, True, lambda n: (n - 1) / n, blocks),
    "scatter": (False, True, True, lambda n: (n - 1) / n, blocks),
    "sendrecv": (False, False, False, lambda n: 1.0, whole),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(mode, np_, cmd, args):
    """Runs one tool; returns (exit status, rank 0's stdout, everything for the failure message)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI_", "PMIX_", "SLURM_", "MASTER_", "TORCHELASTIC_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NCCL_COMM_ID", "MPI_LOCALRANKID",
                         "MPI_LOCALNRANKS")}
    if mode == "threads":
        p = subprocess.run(cmd + ["-t", str(np_)], env=env, capture_output=True, text=True, timeout=args.timeout)
        return p.returncode, p.stdout, p.stdout + p.stderr
    if mode == "mixcclrun":
        p = subprocess.run([args.mixcclrun, "-np", str(np_), "--timeout", str(args.timeout)] + cmd, env=env,
                           capture_output=True, text=True, timeout=args.timeout + 30)
        return p.returncode, p.stdout, p.stdout + p.stderr
    if mode == "mpirun":
        p = subprocess.run([args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np_)] + cmd, env=env,
                           capture_output=True, text=True, timeout=args.timeout)
        return p.returncode, p.stdout, p.stdout + p.stderr
    port = free_port()
    job = str(random.randrange(1, 1 << 30))
    procs = []
    for r in range(np_):
        e = dict(env)
        if mode == "ompi-env":
            e.update(OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(np_), OMPI_COMM_WORLD_LOCAL_RANK=str(r),
                     OMPI_COMM_WORLD_LOCAL_SIZE=str(np_), NCCL_COMM_ID=f"127.0.0.1:{port}")
        elif mode == "pmi-env":
            e.update(PMI_RANK=str(r), PMI_SIZE=str(np_), MPI_LOCALRANKID=str(r), MPI_LOCALNRANKS=str(np_),
                     NCCL_COMM_ID=f"127.0.0.1:{port}")
        elif mode == "slurm-env":
            e.update(SLURM_PROCID=str(r), SLURM_NTASKS=str(np_), SLURM_LOCALID=str(r), SLURM_STEP_NUM_NODES="1",
                     SLURM_JOB_ID=job, SLURM_STEP_ID="0")
        elif mode == "torchrun-env":
            e.update(RANK=str(r), WORLD_SIZE=str(np_), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(np_),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        else:
            raise SystemExit(f"unknown mode {mode}")
        procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
    outs, rc = [], 0
    for p in procs:
        try:
            out, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n(timed out)"
        outs.append(out)
        rc = rc or p.returncode
    return rc, outs[0], "\n".join(f"--- process {i}\n{o}" for i, o in enumerate(outs))


def check_tool(tool, mode, np_, args, tmp):
    reduces, rooted, ip_checked, factor, shape = TOOLS[tool]
    flags = ["-c", "1", "-b", "8", "-e", "64K", "-f", "4", "-n", str(args.iters), "-w", "1"]
    if args.quick:
        types, ops = ["float"], ["sum"]
        flags += ["-d", "float", "-o", "sum"]
    else:
        types, ops = list(TYPES), OPS
        flags += ["-d", "all", "-o", "all"]
    if rooted:
        flags += ["-r", "all"]
    json_path = os.path.join(tmp, f"{tool}.json") if args.json else None
    if json_path:
        flags += ["-J", json_path]
    cmd = [os.path.join(args.bindir, f"{tool}_perf")] + flags
    rc, out, everything = launch(mode, np_, cmd, args)
    where = f"{tool} ({mode}, {np_} ranks): {' '.join(cmd)}"
    if rc != 0:
        return f"{where}: exit status {rc}\n{everything[-3000:]}"
    try:
        res = nccltests_output.parse(out)
    except nccltests_output.FormatError as e:
        return f"{where}: {e}\n{out[-2000:]}"
    problems = []
    pre = res["preamble"]
    nthreads = np_ if mode == "threads" else 1
    if (pre["nThread"], pre["nGpus"], pre["minBytes"], pre["maxBytes"], pre["step"], pre["stepKind"],
            pre["validation"]) != (nthreads, 1, 8, 65536, 4, "factor", 1):
        problems.append(f"preamble {pre}")
    if [d["rank"] for d in res["devices"]] != list(range(np_)):
        problems.append(f"device lines for ranks {[d['rank'] for d in res['devices']]}")
    if res["oob"] != (0, True):
        problems.append(f"out of bounds values {res['oob']}")
    if not res["avg_busbw"] > 0:
        problems.append(f"avg bus bandwidth {res['avg_busbw']}")
    expected = []
    for t in types:
        for op in (ops if reduces else ["none"]):
            for root in (range(np_) if rooted else [-1]):
                size = 8
                while size <= 65536:
                    param, elems = shape(size // TYPES[t], np_, TYPES[t])
                    expected.append((elems * TYPES[t], param, t, op, root))
                    size *= 4
    got = [(r["size"], r["count"], r["type"], r["redop"], r["root"]) for r in res["rows"]]
    if got != expected:
        problems.append(f"rows {got[:4]}... differ from nccl-tests' {expected[:4]}... ({len(got)} vs {len(expected)})")
    # Bandwidths must follow from size and time (a loaded machine may make them round to 0.00, so
    # "busbw > 0" would be a flaky proxy for "measured something").
    for r in res["rows"]:
        if not r["oop_time"] > 0:
            problems.append(f"time {r['oop_time']} on row {r}")
        # time has 2 decimals: its rounding (up to 0.005 us) moves size/time by that fraction.
        elif abs(r["oop_algbw"] - r["size"] / (r["oop_time"] * 1e3)) > 0.006 + r["oop_algbw"] * 0.0051 / r["oop_time"]:
            problems.append(f"algbw {r['oop_algbw']} != size / time on row {r}")
    for r in res["rows"]:
        if r["oop_wrong"] != 0 or (r["ip_wrong"] != 0 if ip_checked else r["ip_wrong"] is not None):
            problems.append(f"wrong values: {r}")
        for g in ("oop", "ip"):
            if abs(r[f"{g}_busbw"] - r[f"{g}_algbw"] * factor(np_)) > 0.011:
                problems.append(f"busbw != algbw * {factor(np_):.3f}: {r}")
    if json_path:
        problems += check_json(json_path, tool, np_, res)
    if problems:
        return f"{where}:\n  " + "\n  ".join(problems[:10]) + f"\n{out[-1500:]}"
    print(f"ok   {tool:15s} {mode} {np_} ranks: {len(res['rows'])} rows, avg busbw {res['avg_busbw']}")
    return None


def check_json(path, tool, np_, res):
    """The -J file: nccl-tests' JSON layout (perf/README.md), matching the text output, and what
    perf/perfjson.py (which perf/compare and perf/plot use) makes of it."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:
        return [f"JSON {path}: {e}"]
    problems = []
    for key in ("version", "start_time", "args", "env", "nccl_version", "config", "results", "out_of_bounds",
                "average_bus_bandwidth", "errors", "end_time", "mixccl"):
        if key not in doc:
            problems.append(f"JSON lacks {key!r}")
    if problems:
        return problems
    if doc["version"] != 2 or doc["nccl_version"] != 22809 or "-J" not in doc["args"]:
        problems.append(f"JSON version {doc['version']}, nccl_version {doc['nccl_version']}, args {doc['args']}")
    cfg = doc["config"]
    want = {"nthreads": np_ if res["preamble"]["nThread"] > 1 else 1, "ngpus": 1, "minimum_bytes": 8,
            "maximum_bytes": 65536, "step_factor": 4, "validation": 1, "graph": 0}
    if any(cfg.get(k) != v for k, v in want.items()) or cfg.get("blocking_collectives") != "false":
        problems.append(f"JSON config {cfg}")
    if [d.get("rank") for d in cfg.get("devices", [])] != list(range(np_)):
        problems.append(f"JSON devices {cfg.get('devices')}")
    want_transport = "tcp" if os.environ.get("NCCL_SHM_DISABLE", "0") not in ("", "0") else "shm"
    m = doc["mixccl"]
    if (m.get("collective"), m.get("nranks"), m.get("transport")) != (tool, np_, want_transport):
        problems.append(f"JSON mixccl {m}, expected {tool}, {np_} ranks, {want_transport}")
    shm_env = os.environ.get("NCCL_SHM_DISABLE")
    if shm_env is not None and f"NCCL_SHM_DISABLE={shm_env}" not in doc["env"]:
        problems.append(f"JSON env {doc['env']} lacks NCCL_SHM_DISABLE={shm_env}")
    results = doc["results"]
    if len(results) != len(res["rows"]):
        problems.append(f"JSON has {len(results)} results, the text {len(res['rows'])} rows")
    for jr, tr in zip(results, res["rows"]):
        if (jr["size"], jr["count"], jr["type"], jr["redop"], int(jr["root"])) != (
                tr["size"], tr["count"], tr["type"], tr["redop"], tr["root"]):
            problems.append(f"JSON result {jr} differs from text row {tr}")
            break
        for key, g in (("out_of_place", "oop"), ("in_place", "ip")):
            cell = jr[key]
            wrong = None if cell.get("nwrong") is None else int(cell["nwrong"])
            if set(cell) != {"time", "alg_bw", "bus_bw", "nwrong"} or wrong != tr[f"{g}_wrong"]:
                problems.append(f"JSON cell {key} {cell} vs text {tr}")
                break
    if doc["out_of_bounds"] != {"count": 0, "okay": "true"}:
        problems.append(f"JSON out_of_bounds {doc['out_of_bounds']}")
    avg = doc["average_bus_bandwidth"]
    if abs(avg.get("bandwidth", -1) - res["avg_busbw"]) > 1e-4 * max(1.0, res["avg_busbw"]) or avg.get(
            "okay") != "unchecked":
        problems.append(f"JSON average_bus_bandwidth {avg} vs text {res['avg_busbw']}")
    norm = perfjson.normalize(doc)
    if (norm["collective"], norm["nranks"], len(norm["rows"])) != (tool, np_, len(res["rows"])) or any(
            (r["bytes"], r["root"], r["oop"]["wrong"]) != (t["size"], t["root"], t["oop_wrong"])
            for r, t in zip(norm["rows"], res["rows"])):
        problems.append(f"perfjson reads {norm['collective']}, {norm['nranks']} ranks, rows {norm['rows'][:2]}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bindir", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--mixcclrun", default="")
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "")
    ap.add_argument("--json", action="store_true", help="also write and check -J output")
    ap.add_argument("--quick", action="store_true", help="float/sum only instead of -d all -o all")
    ap.add_argument("--iters", type=int, default=2, help="-n (the check does not depend on it)")
    ap.add_argument("--timeout", type=int, default=240)
    args = ap.parse_args()
    if args.mode == "mpirun":
        if not args.mpirun:
            print("SKIP: mpirun not found (Debian: apt-get install openmpi-bin)")
            return SKIP
        probe = subprocess.run([args.mpirun, "--version"], capture_output=True, text=True)
        if probe.returncode != 0 or "Open MPI" not in probe.stdout + probe.stderr:
            print(f"SKIP: {args.mpirun} is not Open MPI's (this mode passes Open MPI's flags)")
            return SKIP
    if args.mode == "mixcclrun" and not os.access(args.mixcclrun, os.X_OK):
        print("SKIP: mixcclrun not built")
        return SKIP
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for tool in args.tools.split(","):
            msg = check_tool(tool, args.mode, args.np, args, tmp)
            if msg:
                print("FAIL " + msg)
                failures.append(tool)
    if failures:
        print(f"{len(failures)} tool(s) failed: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
