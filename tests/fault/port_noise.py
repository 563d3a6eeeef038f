#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Random bytes to every port a running job listens on must not break the job.

Starts `mixcclrun -np N all_reduce_perf -c 1 ...` and, for as long as it runs, finds every TCP
port its processes listen on (bootstrap root, each rank's bootstrap listener, each rank's TCP
transport listener: whatever /proc shows, rescanned all the time so listeners of the init phase
are hit too) and throws at each, from several threads: connect-and-close scans, resets, random
bytes of random lengths, messages that start with one of mixccl's magic numbers and go on with
garbage (so they get past the first check), truncated hellos, and idle connections held open.

Passes when the job exits 0 with every value checked correct, noise connections reached the root
and the listening ports of every rank, and the job's log shows that its listeners turned noise away
(WARN lines), so the test cannot pass by missing its target.
"""

import argparse
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

# First four bytes of mixccl's wire messages (little-endian u32 magics, docs/PROTOCOL.md).
MAGICS = [b"MXBH", b"MXBF", b"MXBR", b"MXID", b"MXCT"]


def descendants(root):
    """Pids of root and all its descendants."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def proc_address(hexaddr, family):
    """The address of a /proc/net/tcp{,6} entry (hex, 32-bit words in host order) as text."""
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    text = socket.inet_ntop(family, words)
    if text in ("0.0.0.0", "::"):  # wildcard: reach it through loopback
        return "127.0.0.1" if family == socket.AF_INET else "::1"
    return text


def listening_ports(pids):
    """{(pid, family, address, port)} of TCP sockets in LISTEN state owned by pids."""
    listen = {}  # inode -> (family, address, port)
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A":
                        addr, port = fields[1].rsplit(":", 1)
                        listen[fields[9]] = (family, proc_address(addr, family), int(port, 16))
        except OSError:
            pass
    found = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            m = re.match(r"socket:\[(\d+)\]", link)
            if m and m.group(1) in listen:
                found.add((pid,) + listen[m.group(1)])
    return found


class Noise:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.hits = {}  # (pid, port) -> connections made
        self.actions = {}
        self.held = []

    def payload(self):
        kind = self.rng.randrange(4)
        n = self.rng.choice([1, 3, 16, 47, 48, 63, 64, 100, 4096, 65536])
        body = self.rng.randbytes(n)
        if kind == 0:
            return body
        if kind == 1:  # a magic, then garbage: passes the first check of a parser
            return self.rng.choice(MAGICS) + body
        if kind == 2:  # a magic and a huge length (a frame header that lies)
            return self.rng.choice(MAGICS) + struct.pack("<IQQ", 2, 1 << 62, (1 << 64) - 1) + body[:8]
        return self.rng.choice(MAGICS)[: self.rng.randrange(1, 4)]  # truncated

    def one(self, target):
        _, family, address, port = target
        with self.lock:
            action = self.rng.choice(["scan", "reset", "bytes", "bytes", "hold"])
            data = self.payload()
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(1.0)
        try:
            s.connect((address, port))
        except OSError:
            s.close()
            return
        with self.lock:
            self.hits[target] = self.hits.get(target, 0) + 1
            self.actions[action] = self.actions.get(action, 0) + 1
        try:
            if action == "reset":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif action in ("bytes", "hold"):
                s.sendall(data)
            if action == "hold":
                with self.lock:
                    self.held.append((time.monotonic() + self.rng.uniform(0.5, 3.0), s))
                return
        except OSError:
            pass
        s.close()

    def release_held(self, everything=False):
        now = time.monotonic()
        with self.lock:
            keep = []
            for until, s in self.held:
                if everything or until < now:
                    s.close()
                else:
                    keep.append((until, s))
            self.held = keep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mixcclrun", required=True)
    ap.add_argument("--perf", required=True, help="all_reduce_perf")
    ap.add_argument("--np", type=int, default=3)
    ap.add_argument("--transport", choices=["shm", "tcp"], default="tcp")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    print(f"port_noise: seed {args.seed}, {args.np} ranks over {args.transport}", flush=True)

    env = dict(os.environ, NCCL_DEBUG="WARN", MIXCCL_TIMEOUT="120")
    env.pop("NCCL_DEBUG_FILE", None)
    if args.transport == "tcp":
        env["NCCL_SHM_DISABLE"] = "1"
    # The rendezvous root listens only while the ranks register: name its port here so the noise
    # can hammer it from before the job starts, and hold the last rank back (a gate file, bounded
    # wait) until the noise has reached the root (and the scanner the other ranks, see scanner()). Otherwise the window is milliseconds, and on a
    # loaded machine the noise threads may not run at all inside it.
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    root_port = probe.getsockname()[1]
    probe.close()
    env["NCCL_COMM_ID"] = f"127.0.0.1:{root_port}"
    root = ("root", socket.AF_INET, "127.0.0.1", root_port)
    gate = tempfile.NamedTemporaryFile(prefix="port_noise_gate_", delete=False).name
    os.unlink(gate)
    held_rank = args.np - 1  # not rank 0: the root lives in rank 0's process
    hold = (f'if [ "$RANK" = {held_rank} ]; then i=0; while [ ! -e {gate} ] && [ $i -lt 600 ]; do sleep 0.1; '
            f'i=$((i+1)); done; fi; exec "$@"')
    cmd = [args.mixcclrun, "-np", str(args.np), "/bin/sh", "-c", hold, "sh", args.perf, "-b", "8", "-e", "4M", "-f",
           "2", "-c", "1", "-n", "40", "-w", "2"]
    noise = Noise(args.seed)
    stop = threading.Event()
    targets = set()  # filled by the scanner; the root's port is known in advance
    targets_lock = threading.Lock()
    seen = set()

    def scanner():
        while not stop.is_set():
            found = listening_ports(descendants(job.pid))
            with targets_lock:
                targets.clear()
                targets.update(found)
                targets.add(root)
                seen.update(found)
                seen_pids = len({t[0] for t in seen})
            # The held rank registers once the noise has hit the root and the scanner has found the
            # listeners of every other rank (they listen while registration waits for the held
            # one). Without the second condition a job on an idle machine can finish before the
            # scanner ever saw its ports.
            if noise.hits.get(root, 0) >= 20 and seen_pids >= args.np - 1 and not os.path.exists(gate):
                open(gate, "w").close()
            noise.release_held()
            time.sleep(0.02)

    def thrower():
        while not stop.is_set():
            with targets_lock:
                now = sorted(targets, key=str)
            if not now:
                time.sleep(0.005)
                continue
            with noise.lock:
                # The least-hit ports first: a rank's listener that lives for the whole (short)
                # job is then hit as soon as the scanner finds it, however few turns the noise
                # threads get on a loaded machine; random picks could miss it.
                fewest = min(noise.hits.get(t, 0) for t in now)
                target = noise.rng.choice([t for t in now if noise.hits.get(t, 0) == fewest])
            noise.one(target)

    def root_thrower():
        # The root lives for the few milliseconds of registration: this thread starts before the
        # job and does nothing else until it has hit the root enough (refused connects are cheap).
        while not stop.is_set() and noise.hits.get(root, 0) < 200:
            noise.one(root)

    targets.add(root)
    hammer = threading.Thread(target=root_thrower)
    hammer.start()
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threads = [hammer, threading.Thread(target=scanner)] + [threading.Thread(target=thrower) for _ in range(args.threads)]
    for t in threads[1:]:
        t.start()
    try:
        out, _ = job.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        job.kill()
        out, _ = job.communicate()
        print(out)
        print("port_noise: FAIL: the job did not finish within 300 s")
        return 1
    finally:
        stop.set()
        for t in threads:
            t.join()
        noise.release_held(everything=True)
        if os.path.exists(gate):
            os.unlink(gate)

    ok = True
    pids = {t[0] for t in seen}
    hit_pids = {t[0] for t, n in noise.hits.items() if n > 0}
    total = sum(noise.hits.values())
    print(f"port_noise: {len(seen)} listening ports in {len(pids)} processes; {total} noise connections "
          f"({', '.join(f'{k} {v}' for k, v in sorted(noise.actions.items()))})")
    print(f"  the rendezvous root (port {root_port}, while it listened): {noise.hits.get(root, 0)} connections")
    for target in sorted(seen):
        print(f"  pid {target[0]} {target[2]} port {target[3]}: {noise.hits.get(target, 0)} connections")
    turned_away = [l for l in out.splitlines() if "NCCL WARN" in l]
    print(f"port_noise: the job logged {len(turned_away)} WARN lines; first ones:")
    for l in turned_away[:5]:
        print("  " + l)
    if job.returncode != 0:
        print(out)
        print(f"port_noise: FAIL: the job exited with {job.returncode}")
        ok = False
    elif not re.search(r"# Out of bounds values : 0 OK", out):
        print(out)
        print("port_noise: FAIL: the job did not report every value correct")
        ok = False
    # Every rank listens at least for its bootstrap peers and (TCP) its transport connections.
    want_ports = args.np * (2 if args.transport == "tcp" else 1)
    if len(seen) < want_ports or len(hit_pids) < args.np:
        print(f"port_noise: FAIL: found {len(seen)} ports in {len(hit_pids)} processes; expected at least "
              f"{want_ports} ports in {args.np} rank processes")
        ok = False
    if noise.hits.get(root, 0) == 0:
        print("port_noise: FAIL: no noise connection reached the rendezvous root while it listened")
        ok = False
    if not turned_away:
        print("port_noise: FAIL: no WARN line: the noise never reached a listener's checks")
        ok = False
    print("port_noise: PASS" if ok else "port_noise: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
