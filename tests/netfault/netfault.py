#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Network faults between ranks on separate "hosts" (network namespaces) must fail fast or heal.

Every rank of an `all_reduce_perf -c 1` job runs in a network namespace of its own, with its own
host name (a UTS namespace) and MIXCCL_HOST_ID, so ranks talk TCP over a virtual network:

  bridge topology  rank namespace <p>-r<i>: interface nf0 (10.99.0.<i+1>/24), one end of a veth
                   pair whose other end, v<i>, is a port of bridge br0 in namespace <p>-hub.
  tap topology     rank namespace <p>-r<i>: tap nf0, and tapswitch.py moves frames between the
                   taps with delay and loss (the kernel has no sch_netem).

Scenarios (each once by default; --runs N repeats them):

  blackhole   bridge port v<k> disabled: rank k's frames vanish silently, links stay up.
  down-rank   `ip link set nf0 down` inside rank k's namespace (its routes go, sends fail locally).
  down-peer   `ip link set v<k> down` on the bridge side (rank k's link loses carrier).
  sender      blackhole under broadcast_perf with 8 MiB messages from root 0: the root only sends,
              so it must notice the dead link from its full send buffer (no receive to time out).
  flap        nf0 of rank k down for --flap seconds, then up again, while the job runs.
  netem       tap topology with --delay-ms one-way delay, jitter and --loss.
  pause       rank k stopped (SIGSTOP) for --pause seconds, longer than MIXCCL_NET_TIMEOUT: a late
              rank is not a dead link (its kernel still answers), the job must complete.
  flap-peer   (--long only) like flap, with the bridge side of rank k's link going down.

The first four inject the fault into an endless job (-N 0) once rank 0 has printed results, and
pass when every rank (survivors and the cut-off one) exits with an error within --limit seconds
(30) and some survivor's error names rank k and its host as unreachable. The detection time of
every rank is printed. flap, flap-peer, netem and pause pass when the job completes with every
value correct; pause also checks that a sender really waited behind the stopped rank's closed
receive window (shrunk to 1 MiB for that).

Needs root and `ip netns`; exits 77 (CTest's SKIP_RETURN_CODE) with the reason when network
namespaces, veth pairs, bridges or tap devices cannot be created.
"""

import argparse
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
FAILING = ("blackhole", "down-rank", "down-peer", "sender")
HEALING = ("flap", "netem", "pause")
LONG_ONLY = ("flap-peer",)


def sh(*cmd, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stdout.strip()}")
    return r


def skip(reason):
    print(f"netfault: SKIPPED: {reason}", flush=True)
    sys.exit(SKIP)


def check_prerequisites():
    if os.geteuid() != 0:
        skip("needs root (network namespaces, veth pairs, bridges, tap devices)")
    for tool in ("ip", "bridge", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            skip(f"'{tool}' is not installed (iproute2, util-linux)")
    probe = f"mxnfprobe{os.getpid()}"
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        skip(f"cannot create a network namespace: {r.stdout.strip()}")
    try:
        for cmd in (("ip", "-n", probe, "link", "add", "br0", "type", "bridge"),
                    ("ip", "-n", probe, "link", "add", "va", "type", "veth", "peer", "name", "vb"),
                    ("ip", "-n", probe, "tuntap", "add", "dev", "t0", "mode", "tap"),
                    ("unshare", "--uts", "true")):
            r = sh(*cmd, check=False)
            if r.returncode != 0:
                skip(f"'{' '.join(cmd)}' failed: {r.stdout.strip()}")
    finally:
        sh("ip", "netns", "del", probe, check=False)


def remove_stale_namespaces():
    """Deletes namespaces a killed earlier run left behind (their names carry its pid)."""
    for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
        m = re.match(r"(mxnf(\d+)-\S+)", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            sh("ip", "netns", "del", m.group(1), check=False)


class Net:
    """The namespaces of one job; removed by close()."""

    def __init__(self, prefix, nranks, topology, delay_ms=0.0, jitter_ms=0.0, loss=0.0):
        self.prefix = prefix
        self.nranks = nranks
        self.topology = topology
        self.namespaces = []
        self.switch = None
        try:
            self._build(delay_ms, jitter_ms, loss)
        except BaseException:
            self.close()
            raise

    def ns(self, i):
        return f"{self.prefix}-r{i}"

    @property
    def hub(self):
        return f"{self.prefix}-hub"

    def addr(self, i):
        return f"10.99.0.{i + 1}"

    def host(self, i):
        return f"{self.prefix}-r{i}"

    def _add_ns(self, name):
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    def _build(self, delay_ms, jitter_ms, loss):
        for i in range(self.nranks):
            self._add_ns(self.ns(i))
        if self.topology == "bridge":
            self._add_ns(self.hub)
            sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", self.hub, "link", "set", "br0", "up")
            for i in range(self.nranks):
                # Created inside the hub namespace, then one end moves: no name clashes with
                # other jobs' interfaces in the root namespace.
                sh("ip", "-n", self.hub, "link", "add", f"v{i}", "type", "veth", "peer", "name", "nf0", "netns",
                   self.ns(i))
                sh("ip", "-n", self.hub, "link", "set", f"v{i}", "master", "br0")
                sh("ip", "-n", self.hub, "link", "set", f"v{i}", "up")
        else:
            cmd = [sys.executable, os.path.join(HERE, "tapswitch.py"), "--delay-ms", str(delay_ms), "--jitter-ms",
                   str(jitter_ms), "--loss", str(loss)]
            for i in range(self.nranks):
                cmd += ["--ns", self.ns(i)]
            self.switch = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            if self.switch.stdout.readline().strip() != "ready":
                raise RuntimeError("tapswitch.py did not start")
        for i in range(self.nranks):
            sh("ip", "-n", self.ns(i), "addr", "add", f"{self.addr(i)}/24", "dev", "nf0")
            sh("ip", "-n", self.ns(i), "link", "set", "nf0", "up")

    def close(self):
        if self.switch is not None:
            self.switch.terminate()
            try:
                self.switch.wait(5)
            except subprocess.TimeoutExpired:
                self.switch.kill()
            self.switch = None
        for name in reversed(self.namespaces):
            sh("ip", "netns", "del", name, check=False)
        self.namespaces = []


class Rank:
    """One rank's process, its output lines and when it ended."""

    def __init__(self, net, i, argv, env):
        self.index = i
        self.lines = []
        self.first_error = None  # when its first error line arrived (diagnostics of a late rank)
        self.ended = None
        # ip netns exec and unshare exec the next program, and so does sh: the pid is the rank's.
        cmd = ["ip", "netns", "exec", net.ns(i), "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
               net.host(i)] + argv
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if self.first_error is None and self.errors():
                self.first_error = time.monotonic()
        self.proc.wait()
        self.ended = time.monotonic()

    def rows(self):
        return sum(1 for l in self.lines if re.match(r"^\s+\d+\s+\d+\s+\w+", l))

    def errors(self):
        return [l for l in self.lines if "NCCL WARN" in l or "failed" in l.lower() or "error" in l.lower()]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.reader.join(10)


def start_job(net, args, perf_args, port, tool=None):
    secret = secrets.token_hex(16)
    ranks = []
    for i in range(net.nranks):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith(("NCCL_", "MIXCCL_", "OMPI_", "PMI_", "SLURM_", "MASTER_")):
                del env[k]
        env.update(RANK=str(i), WORLD_SIZE=str(net.nranks), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   NCCL_COMM_ID=f"{net.addr(0)}:{port}", MIXCCL_COMM_SECRET=secret, NCCL_SOCKET_IFNAME="=nf0",
                   MIXCCL_HOST_ID=net.host(i), NCCL_SHM_DISABLE="1", NCCL_DEBUG="WARN", MIXCCL_TIMEOUT="600",
                   MIXCCL_SPIN_COUNT="100")
        if args.net_timeout is not None:
            env["MIXCCL_NET_TIMEOUT"] = str(args.net_timeout)
        ranks.append(Rank(net, i, [tool or args.perf] + perf_args, env))
    return ranks


def wait_rows(ranks, rows, seconds):
    """True once rank 0 printed `rows` result rows; False if a rank ended or time ran out first."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if any(r.ended is not None for r in ranks):
            return False
        if ranks[0].rows() >= rows:
            return True
        time.sleep(0.05)
    return False


def dump(ranks, tail=15):
    for r in ranks:
        print(f"  --- rank {r.index} (exit {r.proc.returncode}), last lines:")
        for l in r.lines[-tail:]:
            print(f"    {l}")


def in_ns(ns, *cmd, check=True):
    """Runs cmd in network namespace ns at once, for what happens while a job runs (the faults,
    their heals, the look at a stopped rank's senders), which is timed.
    Not `ip -n` / `bridge -n`: those also give the command a mount namespace of its own with /sys
    mounted again, and the unmount waits for an RCU grace period, 4-15 s with both cores busy: a
    5 s flap became a 20 s outage, which every rank rightly reported as an unreachable peer."""
    return sh("nsenter", f"--net=/run/netns/{ns}", *cmd, check=check)


def inject(net, scenario, k):
    if scenario in ("blackhole", "sender"):
        # Port state "disabled": the bridge drops the port's frames both ways, carrier stays up.
        # (`ip link set ... type bridge_slave state 0` reports success and changes nothing.)
        in_ns(net.hub, "bridge", "link", "set", "dev", f"v{k}", "state", "0")
    elif scenario in ("down-rank", "flap"):
        in_ns(net.ns(k), "ip", "link", "set", "nf0", "down")
    elif scenario in ("down-peer", "flap-peer"):
        in_ns(net.hub, "ip", "link", "set", f"v{k}", "down")


def heal(net, scenario, k):
    if scenario == "flap":
        in_ns(net.ns(k), "ip", "link", "set", "nf0", "up")
    else:
        in_ns(net.hub, "ip", "link", "set", f"v{k}", "up")


def run_failing(scenario, args, prefix, port):
    k = args.victim % args.nranks
    net = Net(prefix, args.nranks, "bridge")
    ranks = []
    try:
        tool = args.perf
        perf = ["-b", "8", "-e", "4M", "-f", "8", "-c", "1", "-n", "2", "-w", "1", "-N", "0"]
        if scenario == "sender":
            tool = os.path.join(os.path.dirname(args.perf), "broadcast_perf")
            perf = ["-b", "8M", "-e", "8M", "-c", "0", "-n", "20", "-w", "1", "-N", "0", "-r", "0"]
        ranks = start_job(net, args, perf, port, tool)
        if not wait_rows(ranks, 3, 60):
            print(f"{scenario}: FAIL: the job did not get going before the fault")
            dump(ranks)
            return False, {}
        t0 = time.monotonic()
        inject(net, scenario, k)
        injected = time.monotonic() - t0
        if injected > 1.0:
            # `ip link set` waits for the kernel's RTNL lock (a namespace torn down next door holds it).
            print(f"{scenario}: injecting the fault took {injected:.1f} s")
        until = t0 + args.limit + 15  # past the limit, to measure late ranks instead of only failing
        while time.monotonic() < until and any(r.ended is None for r in ranks):
            time.sleep(0.05)
        times = {r.index: (r.ended - t0 if r.ended is not None else None) for r in ranks}
        ok = True
        for r in ranks:
            t = times[r.index]
            first = next(iter(r.errors()), "(no error line)")
            role = "cut off" if r.index == k else "survivor"
            shown = f"{t:5.1f} s" if t is not None else " never"
            said = f"{r.first_error - t0:.1f} s" if r.first_error is not None else "never"
            print(f"{scenario}: rank {r.index} ({role}) failed after {shown} (first error line after {said}), "
                  f"exit {r.proc.poll()}: {first.strip()}")
            if t is None or t > args.limit or r.proc.returncode == 0:
                ok = False
        host = net.host(k)
        named = any(f"rank {k} (host {host}" in l and "unreachable" in l for r in ranks if r.index != k
                    for l in r.lines)
        if not named:
            print(f"{scenario}: no survivor's error names rank {k} (host {host}) as unreachable")
            ok = False
        if not ok:
            dump(ranks)
        print(f"{scenario}: {'PASS' if ok else 'FAIL'} (limit {args.limit} s)", flush=True)
        return ok, times
    finally:
        for r in ranks:
            r.stop()
        net.close()


def run_healing(scenario, args, prefix, port):
    k = args.victim % args.nranks
    tool = None
    if scenario == "netem":
        net = Net(prefix, args.nranks, "tap", args.delay_ms, args.jitter_ms, args.loss)
        perf = ["-b", "8", "-e", "1M", "-f", "4", "-c", "1", "-n", "3", "-w", "1"]
    elif scenario == "pause":
        net = Net(prefix, args.nranks, "bridge")
        # A receive buffer of at most 1 MiB on the stopped rank (32 MiB here by default would swallow
        # a whole row): its window closes long before the pause ends.
        sh("ip", "netns", "exec", net.ns(k), "sh", "-c", "echo 4096 131072 1048576 > /proc/sys/net/ipv4/tcp_rmem")
        # A broadcast root keeps sending whatever the others do: with large rows it fills the stopped
        # rank's receive window instead of waiting for it.
        tool = os.path.join(os.path.dirname(args.perf), "broadcast_perf")
        perf = ["-b", "16M", "-e", "16M", "-c", "1", "-n", "10", "-w", "1", "-N", "3", "-r", "0"]
    else:
        net = Net(prefix, args.nranks, "bridge")
        # Long enough to outlast the flap with rows to spare on both sides of it.
        perf = ["-b", "8", "-e", "4M", "-f", "8", "-c", "1", "-n", "2", "-w", "1", "-N", str(args.cycles)]
    ranks = []
    try:
        t0 = time.monotonic()
        ranks = start_job(net, args, perf, port, tool)
        if scenario != "netem":
            if not wait_rows(ranks, 1 if scenario == "pause" else 3, 60):
                print(f"{scenario}: FAIL: the job ended or stalled before the fault")
                dump(ranks)
                return False, {}
            rows_before = ranks[0].rows()
            if scenario == "pause":
                os.kill(ranks[k].proc.pid, signal.SIGSTOP)  # the pid is the rank's own (Rank)
                time.sleep(args.pause / 2)
                # Senders to the stopped rank sit behind its closed receive window: the case where
                # TCP_USER_TIMEOUT would tear a healthy job down (docs/DEBUGGING.md section 6).
                persist = sum(in_ns(net.ns(i), "ss", "-tno", check=False).stdout.count("persist")
                              for i in range(net.nranks) if i != k)
                print(f"{scenario}: {persist} connection(s) to the stopped rank wait behind a closed window")
                if persist == 0:
                    print(f"{scenario}: FAIL: no sender waits behind a closed window; the scenario tests nothing")
                    os.kill(ranks[k].proc.pid, signal.SIGCONT)
                    return False, {}
                time.sleep(args.pause / 2)
                os.kill(ranks[k].proc.pid, signal.SIGCONT)
            else:
                inject(net, scenario, k)
                time.sleep(args.flap)
                heal(net, scenario, k)
            healed = time.monotonic()
            if any(r.ended is not None for r in ranks):
                print(f"{scenario}: FAIL: a rank ended during the fault (raise --cycles if the job completed)")
                dump(ranks)
                return False, {}
        until = time.monotonic() + args.job_seconds
        while time.monotonic() < until and any(r.ended is None for r in ranks):
            time.sleep(0.05)
        took = time.monotonic() - t0
        if scenario != "netem" and any(r.ended is not None for r in ranks):
            print(f"{scenario}: rank 0 printed {rows_before} rows before the fault; the job ended "
                  f"{max(r.ended for r in ranks if r.ended is not None) - healed:.1f} s after it ended")
        ok = all(r.ended is not None and r.proc.returncode == 0 for r in ranks)
        footer = [l for l in ranks[0].lines if "Out of bounds values" in l]
        ok = ok and bool(footer) and "0 OK" in footer[0]
        what = {"flap": f"{args.flap:g} s flap of rank {k}'s link (rank side)",
                "flap-peer": f"{args.flap:g} s flap of rank {k}'s link (bridge side)",
                "pause": f"{args.pause:g} s SIGSTOP of rank {k}",
                "netem": f"{args.delay_ms:g} ms delay, {args.jitter_ms:g} ms jitter, {args.loss * 100:g}% loss"}[scenario]
        print(f"{scenario}: job with a {what} took {took:.1f} s: {footer[0].strip() if footer else 'no footer'}")
        if not ok:
            dump(ranks)
        print(f"{scenario}: {'PASS' if ok else 'FAIL'}", flush=True)
        return ok, {}
    finally:
        for r in ranks:
            r.stop()
        net.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perf", required=True, help="path of all_reduce_perf")
    ap.add_argument("--scenarios", default=",".join(FAILING + HEALING))
    ap.add_argument("--runs", type=int, default=1, help="repetitions of every scenario")
    ap.add_argument("--nranks", type=int, default=4)
    ap.add_argument("--victim", type=int, default=1, help="rank whose link fails")
    ap.add_argument("--limit", type=float, default=30.0, help="seconds within which every rank must fail")
    ap.add_argument("--net-timeout", type=int, default=None, help="MIXCCL_NET_TIMEOUT (default: the library's)")
    ap.add_argument("--flap", type=float, default=5.0, help="seconds the link is down in 'flap'")
    ap.add_argument("--cycles", type=int, default=12, help="sweeps of the flap and pause jobs (-N)")
    ap.add_argument("--pause", type=float, default=None,
                    help="seconds rank k is stopped in 'pause' (MIXCCL_NET_TIMEOUT + 5: 25 by default)")
    ap.add_argument("--delay-ms", type=float, default=5.0)
    ap.add_argument("--jitter-ms", type=float, default=2.0)
    ap.add_argument("--loss", type=float, default=0.02)
    ap.add_argument("--job-seconds", type=float, default=120.0, help="limit for a healing job to complete")
    ap.add_argument("--serial", action="store_true", help="one scenario at a time (default: one run's at once)")
    ap.add_argument("--long", action="store_true",
                    help="3 runs of everything, flaps of 5 and 10 s on both sides (CTest runs each scenario once)")
    args = ap.parse_args()
    if args.pause is None:
        args.pause = (args.net_timeout if args.net_timeout else 20) + 5.0
    check_prerequisites()

    plan = []
    runs = 3 if args.long else args.runs
    for run in range(runs):
        scenarios = args.scenarios.split(",") + (list(LONG_ONLY) if args.long else [])
        for s in scenarios:
            if s not in FAILING + HEALING + LONG_ONLY:
                ap.error(f"unknown scenario {s}")
            plan.append((s, run, args.flap))
            if args.long and s.startswith("flap"):
                plan.append((s, run, 10.0))
    results = [None] * len(plan)
    remove_stale_namespaces()
    base = f"mxnf{os.getpid()}"

    def one(idx):
        s, run, flap = plan[idx]
        a = argparse.Namespace(**vars(args))
        a.flap = flap
        prefix = f"{base}-{idx}"
        port = 29000 + idx
        try:
            fn = run_failing if s in FAILING else run_healing
            results[idx] = fn(s, a, prefix, port)
        except Exception as e:  # a broken set-up is a failure of this scenario, reported as such
            print(f"{s}: FAIL: {e}", flush=True)
            results[idx] = (False, {})

    start = time.monotonic()
    if args.serial:
        for i in range(len(plan)):
            one(i)
    else:
        # The scenarios of one run go at once (each has its own namespaces); runs follow each other,
        # so the machine never holds more than one run's jobs.
        for run in range(runs):
            threads = [threading.Thread(target=one, args=(i,)) for i in range(len(plan)) if plan[i][1] == run]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    print(f"netfault: {sum(1 for r in results if r[0])} of {len(plan)} scenario runs passed in "
          f"{time.monotonic() - start:.1f} s")
    for (s, run, flap), (ok, times) in zip(plan, results):
        if times:
            worst = max((t for t in times.values() if t is not None), default=None)
            print(f"  {s} run {run}: slowest rank {worst:.1f} s" if worst is not None else f"  {s} run {run}: -")
    sys.exit(0 if all(r[0] for r in results) else 1)


if __name__ == "__main__":
    main()
