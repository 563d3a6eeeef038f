# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""A reader of nccl-tests' text output, written the way result-parsing scripts for nccl-tests read
it (comment lines for the preamble and footer, whitespace-split data rows with 13 fields), with
stricter checks on top: the fixed column layout and number formats. The perf suite runs mixccl's
tools through it, so a change that would break such scripts fails here."""
import re

ROW_FIELDS = ("size", "count", "type", "redop", "root",
              "oop_time", "oop_algbw", "oop_busbw", "oop_wrong",
              "ip_time", "ip_algbw", "ip_busbw", "ip_wrong")
# %12li  %12li  %8s  %6s  %6i, then twice "  %7s  %6.2f  %6.2f  %5g|N/A" (fields here fit their width).
ROW_WIDTH = 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6 + 2 * (2 + 7 + 2 + 6 + 2 + 6 + 2 + 5)

VERSION = re.compile(r"^# nccl-tests version (\S+) \([^)]*\) nccl-headers=(\d+) nccl-library=(\d+)$")
STARTING = re.compile(r"^# Collective test starting: (\w+_perf)$")
CONCLUDED = re.compile(r"^# Collective test concluded: (\w+_perf)$")
PREAMBLE = re.compile(
    r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) "
    r"warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+)$")
DEVICE = re.compile(r"^#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[([^\]]*)\] (.*)$")
OOB = re.compile(r"^# Out of bounds values : (\d+) (OK|FAILED)$")
AVG = re.compile(r"^# Avg bus bandwidth    : (\S+) ?(.*)$")
HEADER2 = ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong"]


class FormatError(Exception):
    pass


def time_ok(text):
    """nccl-tests prints time in us with 2 decimals below 100, 1 below 10000, none above."""
    v = float(text)
    decimals = len(text.split(".")[1]) if "." in text else 0
    return decimals == (2 if v < 100 else 1 if v < 10000 else 0) or round(v, 2) in (100.0, 10000.0)


def parse(text):
    """Returns {"preamble": {...}, "devices": [...], "rows": [...], "oob": (n, ok), "avg_busbw": x}."""
    out = {"version": None, "starting": None, "concluded": None, "preamble": None, "devices": [], "rows": [],
           "oob": None, "avg_busbw": None, "headers": 0}
    for line in text.splitlines():
        if not line.startswith("#"):
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != 13:
                raise FormatError(f"row with {len(fields)} fields, not 13: {line!r}")
            if len(line) != ROW_WIDTH:
                raise FormatError(f"row is {len(line)} characters wide, nccl-tests' layout is {ROW_WIDTH}: {line!r}")
            row = dict(zip(ROW_FIELDS, fields))
            for k in ("size", "count", "root"):
                row[k] = int(row[k])
            for g in ("oop", "ip"):
                if not time_ok(row[f"{g}_time"]):
                    raise FormatError(f"time {row[g + '_time']!r} not in nccl-tests' precision: {line!r}")
                for k in ("algbw", "busbw"):
                    if not re.fullmatch(r"\d+\.\d\d", row[f"{g}_{k}"]):
                        raise FormatError(f"{k} {row[g + '_' + k]!r} is not %6.2f: {line!r}")
                    row[f"{g}_{k}"] = float(row[f"{g}_{k}"])
                row[f"{g}_time"] = float(row[f"{g}_time"])
                w = row[f"{g}_wrong"]
                row[f"{g}_wrong"] = None if w == "N/A" else int(w)
            out["rows"].append(row)
            continue
        if m := VERSION.match(line):
            if out["preamble"] is not None:
                raise FormatError("the '# nccl-tests version' line comes after the preamble")
            out["version"] = {"tests": m[1], "headers": int(m[2]), "library": int(m[3])}
        elif m := STARTING.match(line):
            if out["version"] is None or out["preamble"] is not None:
                raise FormatError("'# Collective test starting' must follow the version line, before the preamble")
            out["starting"] = m[1]
        elif m := CONCLUDED.match(line):
            if out["avg_busbw"] is None:
                raise FormatError("'# Collective test concluded' comes before the footer")
            out["concluded"] = m[1]
        elif m := PREAMBLE.match(line):
            keys = ("nThread", "nGpus", "minBytes", "maxBytes", "step", "stepKind", "warmup", "iters", "agg",
                    "validation", "graph")
            out["preamble"] = {k: (v if k == "stepKind" else int(v)) for k, v in zip(keys, m.groups())}
        elif m := DEVICE.match(line):
            out["devices"].append({"rank": int(m[1]), "group": int(m[2]), "pid": int(m[3]), "host": m[4],
                                   "device": int(m[5]), "bus": m[6], "name": m[7]})
        elif m := OOB.match(line):
            out["oob"] = (int(m[1]), m[2] == "OK")
        elif m := AVG.match(line):
            out["avg_busbw"] = float(m[1])
        elif line.split() == HEADER2:
            out["headers"] += 1
    if out["preamble"] is None:
        raise FormatError("no '# nThread ...' preamble line")
    if out["headers"] != 1:
        raise FormatError("the '# size count type redop root time ...' header line is missing")
    if out["oob"] is None or out["avg_busbw"] is None:
        raise FormatError("footer lines ('# Out of bounds values', '# Avg bus bandwidth') missing")
    if out["starting"] is None or out["starting"] != out["concluded"]:
        raise FormatError(f"'# Collective test starting/concluded' lines missing or naming different tools: "
                          f"{out['starting']!r}, {out['concluded']!r}")
    return out
