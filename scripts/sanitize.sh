#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Builds a subset of the tests under a sanitizer and runs it; any report fails the job.
#
#   bash scripts/sanitize.sh asan   ASan+UBSan (build-asan): unit, transport, coll, mp, fault
#   bash scripts/sanitize.sh tsan   TSan (build-tsan): unit, transport, coll (ranks as threads)
#
# Extra arguments go to ctest (e.g. -R socket). BUILD_DIR overrides the build folder.
# gcc is used: its sanitizer runtimes (libasan, libubsan, libtsan) come with build-essential,
# so install-deps.sh needs nothing more; clang would need libclang-rt-dev for the same checks.
# The build is -O1 -g1: a third faster to compile than -O3 -g, still file:line in reports.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
[[ $mode == asan || $mode == tsan ]] || { echo "usage: $0 asan|tsan [ctest args...]" >&2; exit 2; }
shift

# What each job builds and runs. Names are CMake targets (one per tests/<dir>/*_test.cc) and CTest
# labels; the reasons for leaving things out are next to them.
# Every test program of a folder, so a new suite is sanitized without editing this list.
suites() { for d in "$@"; do ls tests/$d/*_test.cc; done | sed 's|.*/||; s|\.cc$||' | grep -v '^large_count_test$'; }
mapfile -t unit < <(suites unit)
mapfile -t transport < <(suites transport)
mapfile -t coll < <(suites coll)
mapfile -t mp < <(suites mp)
# large_count_test (two ranks with >2 GiB buffers each) is left out of both jobs: it checks 64-bit
# counts, not memory or threading, and costs memory and minutes under instrumentation. The 7- and
# 8-rank CollTest cases run the code of the 2-4-rank ones and are the slowest under a sanitizer
# (CTest names them ".../shm_np8  # GetParam() = ...", hence the space).
exclude='^LargeCount|_np[78]( |$)'
# Forced algorithms (tests/coll/coll_algo_test.cc): the test command runs every algorithm at 1-9
# and 16 ranks, each cell with the full or the light dtype x op x count matrix. Under a sanitizer
# the light matrix at 3-6 ranks runs the same schedules through the same engine and transports:
# every algorithm over both shm and TCP (the transport alternates with the rank count), at odd
# rank counts and powers of two, with the folding of non-power-of-two remainders (recursive
# halving, Rabenseifner) where an offset off by one would overflow. Measured on two busy cores:
# about 1 minute at -j2 under either sanitizer; the light matrix at every rank count took 4.5
# minutes serially under ASan (the 16-rank cells alone 1.8).
exclude+='|^FullMatrix/CollAlgoTest\.|^LightMatrix/CollAlgoTest\.Exact/[a-z]+_np([1-2]|[7-9]|16)_'
if [[ $mode == asan ]]; then
  sanitize=address
  # The schedule sweeps over every rank count from 1 to 33 (ScheduleMatrix.*AtEveryRankCount) were
  # 40 % of this job's test time: pure schedule builders and the in-memory simulator, one thread,
  # which check every offset against the buffer sizes themselves. The unsanitized test command runs
  # them; here the fixed-rank matrices (1-8 and 16 ranks) run the same builders under ASan.
  exclude+='|^ScheduleMatrix\.[A-Za-z]+AtEveryRankCount$'
  # Multi-process suites too: fork()ed ranks, shm segments across processes, kill -9 and abort.
  targets=("${unit[@]}" "${transport[@]}" "${coll[@]}" "${mp[@]}" fault_trials)
  labels='^(unit|transport|coll|mp|fault)$'
  fault_trials=6
  # The 7-16-process jobs of forced algorithms (tests/mp/coll_mp_test.cc): two and a half minutes
  # under ASan for schedules that the thread ranks above and the 2-6-process jobs already run
  # across processes.
  exclude+='|^Algorithms/CollMpTest\..*_np(7|8|9|16)_'
else
  sanitize=thread
  # The multi-process suites (mp, fault) are left out: TSan sees one address space, so races
  # between processes over shared memory are invisible to it, and the threads inside each rank
  # process (root, init, abort) are the same ones the thread-rank suites already exercise.
  targets=("${unit[@]}" "${transport[@]}" "${coll[@]}")
  labels='^(unit|transport|coll)$'
  fault_trials=0
  # Schedules are built and simulated (for values or for time) on one thread: nothing for TSan to
  # find there.
  exclude+='|^ScheduleMatrix|^TimingSim'
  # Forced algorithms at 3 and 4 ranks only: each algorithm runs over shm at one of them and over
  # TCP at the other, at an odd rank count and a power of two, through the same engine threads as
  # at 5 and 6 ranks, whose cells were half of this job's test time (ASan keeps them: there the
  # buffer offsets of the folds matter).
  exclude+='|^LightMatrix/CollAlgoTest\.Exact/[a-z]+_np[56]_'
  # Arithmetic and argument checks, whose threads (init, root, engine) are those of the suites that
  # stay: bad arguments to every entry point, the OpenCL reductions bit for bit against the host's,
  # bitwise determinism across algorithms, every algorithm over mixed host and OpenCL ranks (the
  # other OpenclCollTest cases keep the device engine's threads). And the default algorithms at 3
  # ranks, whose odd rank count the forced ones above run at 3 ranks too. Together a third of this
  # job's test time.
  exclude+='|^EveryEntryPoint/|^Placements/OpenclBackendReduceTest\.|^Transports/DeterministicTest\.'
  exclude+='|^OpenclCollTest\.AlternativeAlgorithmsMixedOHOH$|^Transports/CollTest\.[A-Za-z]+/[a-z]+_np3( |$)'
fi

BUILD_DIR=${BUILD_DIR:-build-$mode}
cmake -S . -B "$BUILD_DIR" -G Ninja -DMIXCCL_BUILD_TORCH=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DMIXCCL_SANITIZE=$sanitize -DMIXCCL_BUILD_PERF=OFF \
  -DMIXCCL_FAULT_TRIALS=$fault_trials >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"

# Every report is fatal (the process exits non-zero, so its test fails); reports go to stderr,
# which ctest prints for failed tests. The only suppressions are leaks inside POCL's compiler
# (scripts/lsan.supp), reported by any test process that compiles an OpenCL kernel.
# allocator_may_return_null=1: HostBackendTest.HugeAllocationFailsWithSystemError asks for 2^63
# bytes and checks that alloc fails cleanly; the sanitizer allocators would abort instead.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1

cd "$BUILD_DIR"
ctest --output-on-failure -j"$(nproc)" --timeout 900 -L "$labels" -E "$exclude" "$@"
