#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""A userspace Ethernet switch between tap devices in several network namespaces, with delay and loss.

The kernel of the test machines has no sch_netem, and a TCP-level proxy cannot lose packets (it
would only delay a byte stream that TCP already made reliable), so this program plays the wire:
it creates a tap device named --ifname in every namespace given with --ns (entering each one with
setns(2) just long enough to create the device; the device stays in that namespace), then moves
Ethernet frames between them like a learning switch. Every frame is dropped with probability
--loss and otherwise delivered --delay-ms (plus up to --jitter-ms, never reordering one port's
frames) after it was read. Prints "ready" once every tap exists; runs until SIGTERM or SIGINT.
Frames are never larger than the taps' MTU: a tap without IFF_VNET_HDR gets segmented packets.
"""

import argparse
import ctypes
import fcntl
import heapq
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def make_tap(ns, ifname):
    """Opens a tap named ifname inside network namespace ns (a name under /run/netns)."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        setns(target)
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TAP | IFF_NO_PI))
    finally:
        setns(home)
        os.close(target)
        os.close(home)
    return fd


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", action="append", required=True, help="namespace to put a tap in (repeat)")
    ap.add_argument("--ifname", default="nf0")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay of every frame")
    ap.add_argument("--jitter-ms", type=float, default=0.0, help="extra random delay, 0..this")
    ap.add_argument("--loss", type=float, default=0.0, help="probability that a frame is dropped")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    taps = [make_tap(ns, args.ifname) for ns in args.ns]
    macs = {}  # source MAC -> port it was last seen on
    queue = []  # (due, seq, port, frame)
    last_due = [0.0] * len(taps)  # per output port: keeps one port's frames in order
    seq = 0
    stats = {"frames": 0, "dropped": 0}
    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)

    poller = select.poll()
    for fd in taps:
        poller.register(fd, select.POLLIN)
    while running:
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, port, frame = heapq.heappop(queue)
            try:
                os.write(taps[port], frame)
            except OSError:
                pass  # the tap is down (a link-down test) or its queue is full: the frame is lost
        # Bounded, so a signal's flag is seen (PEP 475 restarts an interrupted poll).
        timeout = 100 if not queue else min(100, max(0, int((queue[0][0] - now) * 1000)))
        try:
            events = poller.poll(timeout)
        except InterruptedError:
            continue
        now = time.monotonic()
        for fd, _ in events:
            src_port = taps.index(fd)
            for _ in range(64):  # bounded per wake-up, so one busy port cannot starve the others
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    break
                if len(frame) < 14:
                    continue
                stats["frames"] += 1
                macs[frame[6:12]] = src_port
                dst = frame[0:6]
                if dst[0] & 1 or dst not in macs:
                    outs = [p for p in range(len(taps)) if p != src_port]
                else:
                    outs = [macs[dst]] if macs[dst] != src_port else []
                for p in outs:
                    if rng.random() < args.loss:
                        stats["dropped"] += 1
                        continue
                    due = now + (args.delay_ms + rng.random() * args.jitter_ms) / 1000.0
                    due = max(due, last_due[p])
                    last_due[p] = due
                    seq += 1
                    heapq.heappush(queue, (due, seq, p, frame))
    print(f"tapswitch: {stats['frames']} frames, {stats['dropped']} dropped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
