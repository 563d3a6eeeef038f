#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Flag handling of the perf tools: nccl-tests' spellings reach the preamble, unsupported requests
(-m cuda, -g 2, a bad size, a root past the last rank, processes on several hosts without a
rendezvous) fail with a message and a non-zero status; --version names the project version.
Usage: cli_test.py BINDIR VERSION [OPENCL(0/1): the tools were built with OpenCL]"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccltests_output  # noqa: E402

BIN = sys.argv[1]
VERSION = sys.argv[2]
OPENCL = len(sys.argv) > 3 and sys.argv[3] == "1"
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMI_", "PMIX_", "SLURM_", "MASTER_", "NCCL_COMM_ID", "NCCL_TESTS_MIN_BW",
                              "NCCL_DEBUG"))
         and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
failures = []


def run(tool, *flags, env=None):
    e = dict(CLEAN)
    e.update(env or {})
    return subprocess.run([os.path.join(BIN, f"{tool}_perf"), *flags], env=e, capture_output=True, text=True,
                          timeout=60)


def nccltests_json_ok(path):
    """Whether `path` holds a result in nccl-tests' JSON layout with one row."""
    with open(path) as f:
        doc = json.load(f)
    return doc.get("version") == 2 and len(doc.get("results", [])) == 1 and "out_of_place" in doc["results"][0]


def expect(name, cond, p):
    if not cond:
        failures.append(f"{name}: status {p.returncode}\nstdout: {p.stdout[-1500:]}\nstderr: {p.stderr[-800:]}")
    else:
        print(f"ok   {name}")


def refused(name, p, text):
    expect(name, p.returncode != 0 and text in p.stderr, p)


p = run("all_reduce", "-m", "cuda")
refused("-m cuda", p, "CUDA buffers need the CUDA backend, not built yet")
refused("-m bogus", run("all_reduce", "-m", "bogus"), "unknown buffer kind")
refused("-m H,,O", run("all_reduce", "-m", "H,,O"), "unknown buffer kind")
refused("-m H,X", run("all_reduce", "-m", "H,X"), "unknown buffer kind")
if OPENCL:
    # Threads of one process share one device backend: a pattern that mixes them is refused.
    refused("-t 2 -m H,O", run("all_reduce", "-t", "2", "-m", "H,O"), "chosen once per process")
    refused("-m opencl with another MIXCCL_DEVICE_BACKEND",
            run("all_reduce", "-m", "opencl", env={"MIXCCL_DEVICE_BACKEND": "host"}), "MIXCCL_DEVICE_BACKEND is set")
    # Every rank of the process agrees (rank 0 and 2 are H): accepted with host memory.
    p = run("all_reduce", "-t", "1", "-m", "H,O", "-b", "64", "-e", "64")
    expect("-t 1 -m H,O (rank 0 is H)", p.returncode == 0 and "[host]" in p.stdout, p)
else:
    refused("-m opencl without OpenCL", run("all_reduce", "-m", "opencl"), "built without OpenCL")
refused("-g 2", run("all_reduce", "-g", "2"), "-g must be 1")
refused("-b 1Q", run("all_reduce", "-b", "1Q"), "is not a size")
refused("-b 0 -f 2 (never grows)", run("all_reduce", "-b", "0", "-e", "1K", "-f", "2"), "never grows past 0")
# A size this host cannot allocate (1 PiB: past a process's address space, whatever the overcommit
# setting) stops the tool with a message and status 1, not with std::bad_alloc aborting it.
p = run("all_reduce", "-b", "8", "-e", "1048576G", "-f", "2")
expect("-e past the host's memory", p.returncode == 1 and "cannot allocate" in p.stderr and "lower -e" in p.stderr, p)
# nccl-tests' flags for what host memory lacks: their defaults run (scripts spell them out), other
# values are refused with a message naming the flag, not CLI11's "arguments were not expected".
for flag, default, other in (("-y", "0", "1"), ("-C", "0", "1"), ("-S", "0", "1"), ("-D", "0", "1"),
                             ("-x", "-1", "1"), ("-V", "16", None)):
    p = run("all_reduce", "-b", "64", "-e", "64", flag, default)
    expect(f"{flag} {default} accepted", p.returncode == 0 and nccltests_output.parse(p.stdout)["oob"] == (0, True), p)
    if other:
        refused(f"{flag} {other}", run("all_reduce", "-b", "64", "-e", "64", flag, other), f"{flag} {other}: ")
refused("-z 4", run("all_reduce", "-z", "4"), "not in range")
refused("-o bogus", run("all_reduce", "-o", "bogus"), "unknown operation")
refused("-d bogus", run("all_reduce", "-d", "bogus"), "unknown data type")
refused("-r 2 with 2 ranks", run("broadcast", "-t", "2", "-r", "2"), "only 2 ranks")
refused("-r -2", run("broadcast", "-t", "2", "-r", "-2"), "expected a rank number")
# nccl-tests' code reads -r as a number and takes -1 for every root (its README says "all").
for spelling in ("-1", "all"):
    p = run("broadcast", "-t", "2", "-r", spelling, "-b", "64", "-e", "64")
    res = nccltests_output.parse(p.stdout) if p.returncode == 0 else None
    expect(f"-r {spelling}: every root", res and [r["root"] for r in res["rows"]] == [0, 1], p)
refused("several hosts, no rendezvous",
        run("all_reduce", env={"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
                               "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}),
        "NCCL_COMM_ID")
# A torchrun worker started under srun (`srun torchrun ...`): srun's SLURM_PROCID/SLURM_NTASKS name
# the agent's place, TORCHELASTIC_RUN_ID marks RANK/WORLD_SIZE as the innermost launcher's. This
# worker is one of 2 processes (on 2 hosts here), not a 1-rank job.
refused("torchrun worker inside srun",
        run("all_reduce", "-b", "8", "-e", "8",
            env={"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_STEP_NUM_NODES": "1",
                 "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                 "TORCHELASTIC_RUN_ID": "job"}),
        "2 processes (torchrun) span several hosts")
p = run("all_reduce", "--help")
expect("--help", p.returncode == 0 and "--minbytes" in p.stdout and "--op" in p.stdout, p)
p = run("all_reduce", "--version")
version_re = re.compile(rf"all_reduce_perf from mixccl {re.escape(VERSION)}( \(git [0-9a-f]+\))?, NCCL 2\.28\.9 API\n"
                        r"library loaded: ncclGetVersion\(\) = 22809\n")
expect("--version", p.returncode == 0 and version_re.match(p.stdout), p)

# Long and short spellings, suffixes, step in bytes, agg iters through nccl-tests' -m N.
p = run("all_reduce", "--minbytes", "1K", "-e", "3K", "-i", "1K", "-n", "3", "-w", "0", "-m", "2", "-t", "2")
res = nccltests_output.parse(p.stdout) if p.returncode == 0 else None
expect("sizes, -i, -m N", res and res["preamble"]["minBytes"] == 1024 and res["preamble"]["maxBytes"] == 3072
       and res["preamble"]["stepKind"] == "bytes" and res["preamble"]["step"] == 1024 and res["preamble"]["agg"] == 2
       and res["preamble"]["iters"] == 3 and [r["size"] for r in res["rows"]] == [1024, 2048, 3072], p)
# nccl-tests' version line and the markers scripts split logs at, naming the tool and the library.
expect("version and test markers", res and res["version"] == {"tests": "2.17.6", "headers": 22809, "library": 22809}
       and res["starting"] == "all_reduce_perf" and res["concluded"] == "all_reduce_perf", p)
# nccl-tests' --memory is its -M (memory usage report), not -m: a number there must not become agg iters.
refused("--memory 4", run("all_reduce", "--memory", "4"), "memory usage report is not implemented")
refused("-M 1", run("all_reduce", "-M", "1"), "memory usage report is not implemented")
for flags in (("--memory", "0"), ("-M", "0")):
    p = run("all_reduce", "-b", "64", "-e", "64", *flags)
    res = nccltests_output.parse(p.stdout) if p.returncode == 0 else None
    expect(" ".join(flags), res and res["preamble"]["agg"] == 1, p)
p = run("all_reduce", "-b", "64", "-e", "64", "-c", "0", "-t", "2")
res = nccltests_output.parse(p.stdout) if p.returncode == 0 else None
expect("-c 0 prints N/A", res and res["preamble"]["validation"] == 0
       and all(r["oop_wrong"] is None and r["ip_wrong"] is None for r in res["rows"]), p)
p = run("all_gather", "-b", "64", "-e", "256", "-f", "2", "-N", "2", "-z", "1", "-a", "3", "-T", "60", "-t", "2")
res = nccltests_output.parse(p.stdout) if p.returncode == 0 else None
expect("-N 2 -z 1 -a 3 -T 60", res and len(res["rows"]) == 6 and "# Blocking Enabled" in p.stdout, p)
# nccl-tests' -z modes: 2 waits without a barrier, 3 leaves the barrier out of the time.
for z, words in (("2", "no barrier"), ("3", "barrier not timed")):
    p = run("all_reduce", "-b", "64", "-e", "64", "-z", z, "-t", "2")
    res = nccltests_output.parse(p.stdout) if p.returncode == 0 else None
    expect(f"-z {z}", res and res["oob"] == (0, True)
           and re.search(rf"^# Blocking Enabled: .*{words} $", p.stdout, re.M), p)


def barriers(z):
    """The tool's one-double all-reduces (barriers, time and #wrong reductions) in a -n 4 row, from
    NCCL_DEBUG's per-call lines: counts calls, not time."""
    p = run("all_reduce", "-b", "64", "-e", "64", "-n", "4", "-w", "0", "-z", z,
            env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "COLL"})
    return len(re.findall(r"AllReduce: .* count 1 datatype float64 ", p.stdout + p.stderr)) if p.returncode == 0 else -1


n = {z: barriers(z) for z in ("0", "1", "2", "3")}
# 4 iterations x (out-of-place, in-place): -z 1 and 3 add a barrier after each, -z 2 none.
expect(f"-z barriers per iteration {n}", n["0"] > 0 and n["1"] == n["3"] == n["0"] + 8 and n["2"] == n["0"], p)
for a in ("0", "1", "2"):
    p = run("reduce_scatter", "-b", "1K", "-e", "1K", "-a", a, "-t", "3")
    expect(f"-a {a}", p.returncode == 0 and nccltests_output.parse(p.stdout)["oob"] == (0, True), p)
# nccl-tests' CI gate: NCCL_TESTS_MIN_BW (GB/s) fails a run whose average busbw is below 90% of it.
# 1e12 GB/s is out of any machine's reach and 0 within every one's, so neither depends on timing.
p = run("all_reduce", "-b", "1K", "-e", "1K", "-t", "2", env={"NCCL_TESTS_MIN_BW": "1e12"})
expect("NCCL_TESTS_MIN_BW unreachable: FAILED, status 1",
       p.returncode == 1 and re.search(r"^# Avg bus bandwidth    : \S+ FAILED$", p.stdout, re.M)
       and "# Out of bounds values : 0 OK" in p.stdout, p)
p = run("all_reduce", "-b", "1K", "-e", "1K", "-t", "2", env={"NCCL_TESTS_MIN_BW": "0"})
expect("NCCL_TESTS_MIN_BW 0: OK",
       p.returncode == 0 and re.search(r"^# Avg bus bandwidth    : \S+ OK$", p.stdout, re.M), p)
p = run("sendrecv", "-b", "1K", "-e", "1K")
expect("one rank", p.returncode == 0 and nccltests_output.parse(p.stdout)["oob"] == (0, True), p)

# -J as in nccl-tests: an existing file is never overwritten; the report goes to FILE.0, FILE.1, ...
# and the first line names the file. A file that cannot be made stops the tool.
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "r.json")
    with open(path, "w") as f:
        f.write("keep me")
    written = []
    for n in range(2):
        p = run("all_reduce", "-b", "64", "-e", "64", "-t", "2", "-J", path)
        written.append(p.stdout.splitlines()[0] if p.stdout else "")
    with open(path) as f:
        kept = f.read() == "keep me"
    readable = all(os.path.exists(f"{path}.{n}") and nccltests_json_ok(f"{path}.{n}") for n in range(2))
    expect("-J keeps an existing file and writes FILE.0, FILE.1",
           kept and readable and written == [f"# Writing JSON output to {path}.{n}" for n in range(2)], p)
    refused("-J into a missing directory", run("all_reduce", "-b", "64", "-e", "64", "-J",
                                               os.path.join(d, "no", "r.json")), "cannot create the JSON output")

if failures:
    print("FAIL " + "\nFAIL ".join(failures))
    sys.exit(1)
