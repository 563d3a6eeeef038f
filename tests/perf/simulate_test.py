#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""perf/simulate's limits: a case far over the step budget is refused before any schedule is
built (under a 2 GiB address-space limit, so a run that builds it fails instead of swapping), and
an infinite, negative or NaN alpha, beta or gamma is refused with status 2, as bad input.
Usage: simulate_test.py SIMULATE"""
import resource
import subprocess
import sys

SIMULATE = sys.argv[1]
failures = []


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run(*flags):
    return subprocess.run([SIMULATE, *flags], capture_output=True, text=True, timeout=60, preexec_fn=limit_memory)


def check(ok, what, r):
    if not ok:
        failures.append(f"{what}: status {r.returncode}\n{r.stdout}{r.stderr}")


# 99999999 GiB over 2 ranks: 2e11 messages of one 512 KiB chunk each, far over the 4e8 budget.
# The sample used to build a rank's whole schedule first (minutes, tens of GB); 1000 GiB fits.
for algo in ("ring", "all"):
    r = run("--ranks", "2", "--algo", algo, "--bytes", "99999999G")
    check(r.returncode == 0 and "over budget" in r.stdout and "or more" in r.stderr
          and "fewer bytes, a larger chunk" in r.stderr, f"99999999G --algo {algo} refused by the budget", r)
r = run("--ranks", "2", "--algo", "ring", "--bytes", "1000G")
check(r.returncode == 0 and "over budget" not in r.stdout and " ring " in r.stdout, "1000G simulated", r)
# A smaller budget refuses by the same bound, and a larger chunk brings the case back in.
r = run("--ranks", "4", "--algo", "ring", "--bytes", "64M", "--step-budget", "100")
check(r.returncode == 0 and "over budget" in r.stdout and "or more" in r.stderr, "64M with a budget of 100", r)
r = run("--ranks", "4", "--algo", "ring", "--bytes", "64M", "--step-budget", "100", "--chunk", "64M")
check(r.returncode == 0 and "over budget" not in r.stdout, "64M in 64M chunks with a budget of 100", r)

for flag in ("--alpha-intra", "--beta-intra", "--alpha-inter", "--beta-inter", "--gamma"):
    for value in ("inf", "-inf", "nan", "-1"):
        r = run("--ranks", "2", "--algo", "ring", f"{flag}={value}")
        check(r.returncode == 2 and f"{flag} " in r.stderr and "finite and non-negative" in r.stderr
              and "time(us)" not in r.stdout,
              f"{flag}={value} refused", r)

# A chunk over MIXCCL_CHUNK_SIZE's 1 GiB is bad input (status 2), not a failed simulation (status 1,
# a builder bug): 12 GiB in one 12 GiB message was more than the simulator stores per message.
r = run("--ranks", "2", "--algo", "ring", "--coll", "broadcast", "--bytes", "12G", "--chunk", "12G")
check(r.returncode == 2 and "--chunk" in r.stderr and "1 GiB" in r.stderr and "time(us)" not in r.stdout,
      "--chunk 12G refused", r)
r = run("--ranks", "2", "--algo", "ring", "--coll", "broadcast", "--bytes", "4G", "--chunk", "1G")
check(r.returncode == 0 and " ring " in r.stdout, "--chunk 1G simulated", r)

for f in failures:
    print("FAIL:", f)
print(f"simulate_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
