#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Checks every #include of the source tree against the layer table (DESIGN.md section 1).

The build enforces the same rule with per-layer include roots (cmake/components.cmake); this
check also covers headers that no target compiles yet, gives one readable list of every
violation, and runs without a build.

  check_includes.py <source root>                     check the tree; exit 1 on a violation
  check_includes.py --self-test                       prove the checker fails on bad fixtures
  check_includes.py --compile-test <cxx> <layers dir> <source root>
                                                      prove the build's include roots refuse an
                                                      upward include (and accept a downward one)
"""
import os
import re
import subprocess
import sys
import tempfile

# Folder -> the internal folders its files may include. A file belongs to the longest folder
# that prefixes its path. Internal folders are the keys of LAYERS; anything else in an include
# (nccl.h, mixccl/debug.h, <vector>, a file next to the includer) is public or system.
LAYERS = {
    "common": ["common"],
    "algorithms": ["algorithms", "common"],
    "src/device": ["src/device", "common"],
    "transports": ["transports", "common"],
    "src/core": ["src/core", "src/device", "transports", "algorithms", "common"],
    "src/api": ["src/api", "src/core", "src/device", "transports", "algorithms", "common"],
}
# Folders that use only the public headers (include/), and their own files.
PUBLIC_ONLY = {
    "perf": ["perf"],
    "examples": ["examples"],
    "torch": ["torch"],  # the PyTorch backend: a client of nccl.h like any application
    "tests/abi": ["tests/abi"],
}
# Internal folders an include can name.
INTERNAL = sorted(list(LAYERS) + ["perf", "examples", "tests"], key=len, reverse=True)
# NCCL's names stay in include/ and src/api (DESIGN.md section 4.2).
NCCL_HEADER_ALLOWED = ["src/api"]
# Deliberate exceptions, each with its reason.
EXCEPTIONS = {
    # A micro-benchmark of the host reduction kernels themselves (not of the library's API).
    ("perf/bench_reduce.cc", "src/device"): "kernel benchmark",
    ("perf/bench_reduce.cc", "common"): "kernel benchmark",
    # Runs the library's own schedule builders and tuner through the timing simulator.
    ("perf/simulate.cc", "algorithms"): "schedule timing simulator",
    ("perf/simulate.cc", "src/core"): "schedule timing simulator",
    ("perf/simulate.cc", "common"): "schedule timing simulator",
}
SOURCE_EXT = (".h", ".hpp", ".c", ".cc", ".cpp", ".inc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def owner(path, table):
    best = None
    for folder in table:
        if (path == folder or path.startswith(folder + "/")) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def internal_folder(target):
    for folder in INTERNAL:
        if target == folder or target.startswith(folder + "/"):
            return folder
    return None


def check_file(rel, text):
    """Violations in one file: a list of 'path:line: message'."""
    layer = owner(rel, LAYERS)
    public = owner(rel, PUBLIC_ONLY) if layer is None else None
    if layer is None and public is None:
        return []  # tests/unit etc. may include anything
    allowed = LAYERS[layer] if layer else PUBLIC_ONLY[public]
    where = layer or public
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = INCLUDE_RE.match(line)
        if not m:
            continue
        target = m.group(1)
        if target == "nccl.h" and layer is not None and layer not in NCCL_HEADER_ALLOWED:
            out.append(f"{rel}:{n}: includes nccl.h; NCCL's names belong to include/ and src/api only")
            continue
        folder = internal_folder(target)
        if folder is None:
            continue
        # An include of tests/support or tests/abi from a layer is as wrong as one of a higher layer.
        if any(folder == a or target.startswith(a + "/") for a in allowed):
            continue
        if (rel, folder) in EXCEPTIONS:
            continue
        out.append(f'{rel}:{n}: "{target}" is in {folder}/, which {where}/ may not include '
                   f"(allowed: {', '.join(allowed) if allowed else 'none'}{' and include/' if public else ''})")
    return out


def check_tree(root):
    violations = []
    checked = 0
    for base in list(LAYERS) + list(PUBLIC_ONLY):
        top = os.path.join(root, base)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                # A deeper table entry owns its own files (tests/abi is walked once, as itself).
                if owner(rel, LAYERS) != base and owner(rel, PUBLIC_ONLY) != base:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    violations += check_file(rel, f.read())
                checked += 1
    return checked, violations


def report(root):
    checked, violations = check_tree(root)
    for v in violations:
        print(v)
    if violations:
        print(f"layering: {len(violations)} include(s) break the layer table in tests/layering/check_includes.py "
              f"(DESIGN.md section 1): move the code down a layer, or pass what it needs through an interface")
        return 1
    if checked == 0:
        print(f"layering: no source files under {root}: wrong source root?")
        return 1
    print(f"layering: {checked} files, every #include respects the layers")
    return 0


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def self_test():
    """The checker passes a clean fixture and fails each bad one, naming the offending line."""
    good = {
        "common/a.h": '#include <vector>\n#include "common/b.h"\n',
        "transports/x/t.cc": '#include "transports/transport.h"\n#include "common/a.h"\n',
        "src/core/c.cc": '#include "transports/transport.h"\n#include "algorithms/s.h"\n#include "src/device/d.h"\n',
        "src/api/api.cc": '#include "nccl.h"\n#include "src/core/c.h"\n',
        "perf/p.cc": '#include "nccl.h"\n#include "perf/common/x.h"\n',
        "tests/unit/u.cc": '#include "src/core/c.h"\n#include "tests/support/s.h"\n',
    }
    bad = {
        "transports/x/t.cc": '#include "src/core/communicator.h"\n',
        "algorithms/a.cc": '#include "transports/transport.h"\n',
        "common/c.h": '#include "src/device/device_backend.h"\n',
        "src/device/host/h.cc": '  #  include <src/core/op.h>\n',
        "src/core/c.cc": '#include "src/api/handle.h"\n',
        "src/core/n.cc": '#include "nccl.h"\n',
        "examples/e.c": '#include "common/log.h"\n',
        "tests/abi/t.cc": '#include "src/core/op.h"\n',
        "src/device/t.cc": '#include "tests/support/env_guard.h"\n',
    }
    failures = []
    with tempfile.TemporaryDirectory() as root:
        for rel, text in good.items():
            write(root, rel, text)
        checked, violations = check_tree(root)
        walked = sum(1 for rel in good if owner(rel, LAYERS) or owner(rel, PUBLIC_ONLY))
        if violations or checked != walked:
            failures.append(f"clean fixture: {checked} files checked, violations {violations}")
    for rel, text in bad.items():
        with tempfile.TemporaryDirectory() as root:
            for g, gtext in good.items():
                write(root, g, gtext)
            write(root, rel, text)
            _, violations = check_tree(root)
            if len(violations) != 1 or not violations[0].startswith(rel + ":1:"):
                failures.append(f"bad fixture {rel} ({text.strip()}): got {violations}")
    for f in failures:
        print("self-test FAILED:", f)
    if not failures:
        print(f"layering self-test: clean fixture passes, {len(bad)} bad fixtures each fail on their line")
    return 1 if failures else 0


def compile_test(cxx, layers, source_root):
    """The include roots of the build refuse an upward include and accept a downward one."""
    cases = [
        ("transports", '#include "transports/transport.h"\n', True),
        ("transports", '#include "src/core/communicator.h"\n', False),
        ("algorithms", '#include "transports/transport.h"\n', False),
        ("device", '#include "src/core/op.h"\n', False),
        ("common", '#include "algorithms/schedule.h"\n', False),
        ("core", '#include "src/api/handle.h"\n', False),
        ("core", '#include "src/core/communicator.h"\n', True),
    ]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for layer, text, ok in cases:
            src = os.path.join(tmp, "probe.cc")
            with open(src, "w") as f:
                f.write(text)
            root = os.path.join(layers, layer)
            if not os.path.isdir(root):
                failures.append(f"no include root {root}: configure the build first")
                continue
            cmd = [cxx, "-std=c++20", "-fsyntax-only", "-I", root, "-I", os.path.join(source_root, "include"), src]
            r = subprocess.run(cmd, capture_output=True, text=True)
            compiled = r.returncode == 0
            if compiled != ok:
                failures.append(f"layer {layer}: {text.strip()} {'failed' if ok else 'compiled'}; "
                                f"expected it to {'compile' if ok else 'fail'}\n{r.stderr[-600:]}")
            elif not ok and "No such file" not in r.stderr and "not found" not in r.stderr:
                failures.append(f"layer {layer}: {text.strip()} failed for another reason:\n{r.stderr[-600:]}")
    for f in failures:
        print("compile test FAILED:", f)
    if not failures:
        print(f"layering compile test: {len(cases)} probes, upward includes are 'file not found'")
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) == 5 and argv[1] == "--compile-test":
        return compile_test(argv[2], argv[3], argv[4])
    if len(argv) == 2:
        return report(argv[1])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
