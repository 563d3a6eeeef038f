# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Reads the two JSON result layouts the perf scripts meet, into one shape.

- nccl-tests' layout (version 2), which mixccl's perf tools write with -J, and nccl-tests itself:
  {"config": {...}, "results": [{"size", "count", "type", "redop", "root",
   "out_of_place": {"time", "alg_bw", "bus_bw", "nwrong"}, "in_place": {...}}], ...,
   "mixccl": {"collective", "nranks", "transport", ...}} (the last only from mixccl).
- The reference harnesses' layout (perf/compare-src: Open MPI, MPICH, gloo) and perf/compare's
  merged files: {"tool", "collective", "nranks", "transport", "rows": [{"bytes", "count", "type",
  "redop", "root", "oop": {"time_us", "algbw", "busbw", "wrong"}, "ip": {...} | null}], "avg_busbw"}.

load() returns the second shape for either, so every script reads one.
"""
import json


class FormatError(ValueError):
    pass


def _cell(c):
    if c is None:
        return None
    if not isinstance(c, dict):
        raise FormatError(f"result cell is not an object: {c!r}")
    time = c.get("time", c.get("cpu_time"))
    wrong = c.get("nwrong")
    return {"time_us": time, "algbw": c.get("alg_bw"), "busbw": c.get("bus_bw"),
            "wrong": None if wrong is None else int(wrong)}


def normalize(doc):
    """One parsed document in either layout -> the harnesses' layout (a new dict)."""
    if not isinstance(doc, dict):
        raise FormatError("not a JSON object")
    if isinstance(doc.get("rows"), list):
        return doc
    results = doc.get("results")
    if not isinstance(results, list):
        raise FormatError("neither nccl-tests' layout (a 'results' list) nor the harnesses' (a 'rows' list)")
    rows = []
    for i, r in enumerate(results):
        if not isinstance(r, dict):
            raise FormatError(f"result {i} is not an object")
        try:
            root = int(str(r.get("root", "-1")).strip())
        except ValueError:
            raise FormatError(f"result {i}: root {r.get('root')!r} is not a number") from None
        rows.append({"bytes": r.get("size"), "count": r.get("count"), "type": r.get("type"),
                     "redop": r.get("redop"), "root": root, "oop": _cell(r.get("out_of_place")),
                     "ip": _cell(r.get("in_place"))})
    mixccl = doc.get("mixccl") if isinstance(doc.get("mixccl"), dict) else {}
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    devices = config.get("devices") if isinstance(config.get("devices"), list) else []
    name = results[0].get("experiment_name", "?") if results and isinstance(results[0], dict) else "?"
    avg = doc.get("average_bus_bandwidth")
    return {"tool": "mixccl" if mixccl else "nccl-tests",
            "collective": mixccl.get("collective", name),
            "nranks": mixccl.get("nranks", len(devices)),
            "transport": mixccl.get("transport", "?"),
            "host": mixccl.get("host", devices[0].get("hostname", "?") if devices else "?"),
            "env": doc.get("env", []),
            "rows": rows,
            "avg_busbw": avg.get("bandwidth") if isinstance(avg, dict) else None}


def load(path):
    """The result file at `path` in the harnesses' layout; OSError, ValueError (FormatError) if not."""
    with open(path, encoding="utf-8") as f:
        return normalize(json.load(f))
