#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Behaviour tests of mixcclrun. Usage: launcher_test.sh MIXCCLRUN CASE
# Each CASE is one CTest test (tests/run/CMakeLists.txt). Ranks are small `sh -c` scripts that
# leave files in a scratch directory, so the checks read what each rank saw.
set -uo pipefail
run=$1
case_name=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export D=$dir

fail() {
  echo "FAIL [$case_name]: $*" >&2
  for f in "$dir"/out "$dir"/err; do [ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }; done
  exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Waits up to 10 s for every named file to exist.
wait_files() {
  for _ in $(seq 100); do
    local all=1
    for f in "$@"; do [ -e "$f" ] || all=0; done
    [ $all = 1 ] && return 0
    sleep 0.1
  done
  fail "timed out waiting for $*"
}
# True if the pid is gone (a zombie counts as gone: it no longer runs).
gone() { [ ! -e /proc/$1 ] || grep -q '^[^)]*) Z' /proc/$1/stat 2>/dev/null; }
expect_rc() { [ "$1" = "$2" ] || fail "exit status $1, expected $2"; }
expect_err() { grep -q -- "$1" "$dir/err" || fail "stderr lacks '$1'"; }

case $case_name in
env)
  export PASSED_ON=from-parent
  "$run" -np 3 -x EXTRA=one -x PASSED_ON --env=SECOND=two sh -c \
    'echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $NCCL_COMM_ID $EXTRA $PASSED_ON $SECOND" > $D/env.$RANK' \
    >"$dir/out" 2>"$dir/err"
  expect_rc $? 0
  read -r _ _ _ _ _ port id _ <"$dir/env.0"
  [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || fail "MASTER_PORT '$port' is not a port"
  case $id in 127.0.0.1:[0-9]*) ;; *) fail "NCCL_COMM_ID '$id' is not 127.0.0.1:port" ;; esac
  # Two ports: a rank's own store (PyTorch) may bind MASTER_PORT while mixccl binds NCCL_COMM_ID's.
  [ "${id#127.0.0.1:}" != "$port" ] || fail "NCCL_COMM_ID reuses MASTER_PORT $port"
  for r in 0 1 2; do
    want="$r 3 $r 3 127.0.0.1 $port $id one from-parent two"
    [ "$(cat "$dir/env.$r")" = "$want" ] || fail "rank $r saw '$(cat "$dir/env.$r")', expected '$want'"
  done
  # Each rank gets its share of the cores for a CPU OpenCL device's worker threads (at least 1);
  # a user's POCL_MAX_PTHREAD_COUNT is kept.
  cores=$(nproc)
  "$run" -np 2 sh -c 'echo "$POCL_MAX_PTHREAD_COUNT" > $D/pocl.$RANK'
  expect_rc $? 0
  want=$((cores / 2)); [ "$want" -ge 1 ] || want=1
  [ "$(cat "$dir/pocl.1")" = "$want" ] || fail "POCL_MAX_PTHREAD_COUNT '$(cat "$dir/pocl.1")', expected $want"
  "$run" -np $((cores + 1)) sh -c 'echo "$POCL_MAX_PTHREAD_COUNT" > $D/pocl.$RANK'
  [ "$(cat "$dir/pocl.0")" = "1" ] || fail "POCL_MAX_PTHREAD_COUNT '$(cat "$dir/pocl.0")' with more ranks than cores"
  POCL_MAX_PTHREAD_COUNT=7 "$run" -np 2 sh -c 'echo "$POCL_MAX_PTHREAD_COUNT" > $D/pocl.$RANK'
  [ "$(cat "$dir/pocl.0")" = "7" ] || fail "a user's POCL_MAX_PTHREAD_COUNT=7 became '$(cat "$dir/pocl.0")'"
  # --port P gives P and P+1; a user's NCCL_COMM_ID (ours or -x) is kept.
  "$run" -np 2 --port 29999 sh -c 'echo "$MASTER_PORT $NCCL_COMM_ID" > $D/id.$RANK'
  expect_rc $? 0
  [ "$(cat "$dir/id.1")" = "29999 127.0.0.1:30000" ] || fail "--port 29999 gave $(cat "$dir/id.1")"
  # With our NCCL_COMM_ID comes a fresh random MIXCCL_COMM_SECRET per job, the same on every rank.
  "$run" -np 2 sh -c 'echo "$MIXCCL_COMM_SECRET" > $D/sec.$RANK'
  expect_rc $? 0
  cp "$dir/sec.0" "$dir/sec.first"
  "$run" -np 2 sh -c 'echo "$MIXCCL_COMM_SECRET" > $D/sec.$RANK'
  grep -qE '^[0-9a-f]{32}$' "$dir/sec.0" || fail "MIXCCL_COMM_SECRET '$(cat "$dir/sec.0")' is not 32 hex digits"
  cmp -s "$dir/sec.0" "$dir/sec.1" || fail "ranks got different MIXCCL_COMM_SECRET values"
  ! cmp -s "$dir/sec.0" "$dir/sec.first" || fail "two jobs got the same MIXCCL_COMM_SECRET"
  NCCL_COMM_ID=10.1.2.3:4567 "$run" -np 2 sh -c 'echo "$NCCL_COMM_ID ${MIXCCL_COMM_SECRET:-none}" > $D/id.$RANK'
  expect_rc $? 0
  # A user's NCCL_COMM_ID may serve ranks started elsewhere: no secret they could not know.
  [ "$(cat "$dir/id.1")" = "10.1.2.3:4567 none" ] || fail "user NCCL_COMM_ID not kept: $(cat "$dir/id.1")"
  "$run" -np 2 -x NCCL_COMM_ID=10.9.9.9:1234 sh -c 'echo "$NCCL_COMM_ID" > $D/id.$RANK'
  [ "$(cat "$dir/id.0")" = "10.9.9.9:1234" ] || fail "-x NCCL_COMM_ID not kept: $(cat "$dir/id.0")"
  ;;
outer_launcher)
  # Started from a task of another launcher (here: what srun, mpirun and Hydra put in a task's
  # environment), the ranks must not see that task's rank and size: the perf tools read them before
  # RANK/WORLD_SIZE and would each run as rank 0 of a 1-rank job. Other variables are kept, and -x
  # may still set one on purpose.
  outer="OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE PMI_RANK
         PMI_SIZE MPI_LOCALRANKID MPI_LOCALNRANKS SLURM_PROCID SLURM_NTASKS SLURM_LOCALID"
  for v in $outer; do export "$v=0"; done
  export OMPI_COMM_WORLD_SIZE=1 PMI_SIZE=1 SLURM_NTASKS=1 MPI_LOCALNRANKS=1 OMPI_COMM_WORLD_LOCAL_SIZE=1
  export SLURM_JOB_ID=4242
  "$run" -np 2 -x SLURM_NODEID=7 sh -c 'env > $D/env.$RANK' >"$dir/out" 2>"$dir/err"
  expect_rc $? 0
  for r in 0 1; do
    for v in $outer; do
      ! grep -q "^$v=" "$dir/env.$r" || fail "rank $r got the outer task's $(grep "^$v=" "$dir/env.$r")"
    done
    grep -qx "RANK=$r" "$dir/env.$r" || fail "rank $r lacks RANK=$r"
    grep -qx "SLURM_JOB_ID=4242" "$dir/env.$r" || fail "rank $r lost SLURM_JOB_ID"
    grep -qx "SLURM_NODEID=7" "$dir/env.$r" || fail "rank $r lost -x SLURM_NODEID=7"
  done
  ;;
rank_env)
  # --rank-env gives some ranks their own variables, after -x, in the order given.
  "$run" -np 4 -x B=all --rank-env 1,3 B=odd --rank-env 0-1 C=low sh -c 'echo "${B-} ${C-}" > $D/re.$RANK' \
    >"$dir/out" 2>"$dir/err"
  expect_rc $? 0
  for want in "0:all low" "1:odd low" "2:all " "3:odd "; do
    r=${want%%:*}
    [ "$(cat "$dir/re.$r")" = "${want#*:}" ] || fail "rank $r saw '$(cat "$dir/re.$r")', expected '${want#*:}'"
  done
  for args in "--rank-env 4 X=1" "--rank-env 1 X" "--rank-env 1,,2 X=1" "--rank-env 2-1 X=1" "--rank-env 1"; do
    # shellcheck disable=SC2086
    "$run" -np 4 $args true >"$dir/out" 2>"$dir/err"
    expect_rc $? 2
    grep -q "^mixcclrun: .*rank" "$dir/err" || fail "no message for '$args': $(cat "$dir/err")"
  done
  ;;
exit_code)
  "$run" -np 4 true >"$dir/out" 2>"$dir/err"
  expect_rc $? 0
  "$run" -np 3 sh -c '[ $RANK = 2 ] && exit 7; exit 0' >"$dir/out" 2>"$dir/err"
  expect_rc $? 7
  expect_err "rank 2 (pid [0-9]*) exited with code 7"
  ;;
failure_stops_others)
  t0=$(now_ms)
  "$run" -np 4 sh -c 'echo $$ > $D/pid.$RANK; [ $RANK = 1 ] && { sleep 0.3; exit 5; }; exec sleep 30' \
    >"$dir/out" 2>"$dir/err"
  rc=$?
  elapsed=$(($(now_ms) - t0))
  expect_rc $rc 5
  expect_err "rank 1 (pid [0-9]*) exited with code 5"
  [ $elapsed -lt 4000 ] || fail "took ${elapsed} ms to stop the other ranks"
  for r in 0 2 3; do gone "$(cat "$dir/pid.$r")" || fail "rank $r still runs"; done
  ;;
grace_sigkill)
  # Ranks that ignore SIGTERM get SIGKILL after --grace.
  t0=$(now_ms)
  "$run" -np 3 --grace 1 sh -c 'trap "" TERM; touch $D/ready.$RANK; [ $RANK = 0 ] && { sleep 0.5; exit 1; }; while :; do sleep 0.1; done' \
    >"$dir/out" 2>"$dir/err"
  rc=$?
  elapsed=$(($(now_ms) - t0))
  expect_rc $rc 1
  expect_err "rank 0 (pid [0-9]*) exited with code 1"
  expect_err "sending SIGKILL"
  [ $elapsed -ge 1000 ] && [ $elapsed -lt 5000 ] || fail "SIGKILL came after ${elapsed} ms, expected ~1500"
  ;;
rank_signal)
  "$run" -np 3 sh -c '[ $RANK = 1 ] && kill -KILL $$; exec sleep 30' >"$dir/out" 2>"$dir/err"
  expect_rc $? 137
  expect_err "rank 1 (pid [0-9]*) was killed by signal 9 (SIGKILL)"
  ;;
forward_term)
  "$run" -np 3 sh -c 'trap "touch $D/got.\$RANK; exit 0" TERM; touch $D/ready.$RANK; while :; do sleep 0.1; done' \
    >"$dir/out" 2>"$dir/err" &
  pid=$!
  wait_files "$dir"/ready.{0,1,2}
  kill -TERM $pid
  wait $pid
  expect_rc $? 143
  wait_files "$dir"/got.{0,1,2}
  expect_err "received SIGTERM"
  ;;
forward_usr)
  # SIGUSR1/2 are forwarded without stopping the job.
  "$run" -np 2 sh -c 'trap "touch $D/usr1.\$RANK" USR1; trap "touch $D/usr2.\$RANK" USR2; touch $D/ready.$RANK;
                      while [ ! -e $D/usr2.$RANK ]; do sleep 0.1; done; exit 0' >"$dir/out" 2>"$dir/err" &
  pid=$!
  wait_files "$dir"/ready.{0,1}
  kill -USR1 $pid
  wait_files "$dir"/usr1.{0,1}
  kill -USR2 $pid
  wait $pid
  expect_rc $? 0
  ;;
ctrl_c_once)
  # A terminal's Ctrl-C signals the whole foreground process group. Job control (set -m) gives
  # mixcclrun its own group, as an interactive shell would; each rank must count one SIGINT.
  # Two SIGINTs sent back to back may merge into one, so the count alone cannot catch a double
  # delivery: the ranks must also lead their own process groups, outside mixcclrun's.
  set -m
  "$run" -np 2 --grace 1 sh -c 'trap "echo int >> $D/int.\$RANK" INT; echo $$ > $D/pid.$RANK; touch $D/ready.$RANK;
                                while :; do sleep 0.1; done' >"$dir/out" 2>"$dir/err" &
  pid=$!
  set +m
  wait_files "$dir"/ready.{0,1}
  for r in 0 1; do
    p=$(cat "$dir/pid.$r")
    pgrp=$(sed 's/^.*) //' /proc/"$p"/stat | cut -d' ' -f3)
    [ "$pgrp" = "$p" ] || fail "rank $r (pid $p) is in process group $pgrp, not its own"
  done
  kill -INT -- -"$pid"
  wait $pid
  expect_rc $? 130
  for r in 0 1; do
    [ "$(wc -l <"$dir/int.$r")" = 1 ] || fail "rank $r got $(wc -l <"$dir/int.$r") SIGINTs, expected 1"
  done
  ;;
timeout)
  t0=$(now_ms)
  "$run" -np 2 --timeout 1 sleep 30 >"$dir/out" 2>"$dir/err"
  rc=$?
  elapsed=$(($(now_ms) - t0))
  expect_rc $rc 124
  expect_err "timeout"
  [ $elapsed -ge 900 ] && [ $elapsed -lt 4000 ] || fail "timeout took ${elapsed} ms"
  ;;
tag_output_flood)
  # A rank that prints faster than mixcclrun tags its lines keeps its pipe full; the launcher must
  # still see its --timeout (and signals) rather than read that pipe forever. timeout(1)'s SIGKILL
  # only bounds the failing case (exit 137); the ranks die with mixcclrun (parent-death signal).
  timeout -s KILL 30 "$run" -np 1 --tag-output --timeout 1 sh -c 'yes & yes & yes & wait' >/dev/null 2>"$dir/err"
  expect_rc $? 124
  expect_err "timeout"
  ;;
huge_limits)
  # A --timeout or --grace past what the clock counts means "no limit", not "already expired":
  # the ranks end only when told to, so a limit that fired at once would show as 124.
  "$run" -np 2 --timeout 1e10 --grace 1e300 sh -c 'touch $D/ready.$RANK; while [ ! -e $D/go ]; do sleep 0.05; done' \
    >"$dir/out" 2>"$dir/err" &
  pid=$!
  wait_files "$dir"/ready.{0,1}
  touch "$dir/go"
  wait $pid
  expect_rc $? 0
  ;;
job_control)
  # Ctrl-Z: the ranks (process groups of their own) stop with the launcher, and SIGCONT continues
  # them all. A rank counts ticks into a file; a stopped one adds none.
  "$run" -np 2 sh -c 'i=0; while [ ! -e $D/go ]; do i=$((i+1)); echo $i > $D/tick.$RANK; sleep 0.05; done' \
    >"$dir/out" 2>"$dir/err" &
  pid=$!
  wait_files "$dir"/tick.{0,1}
  kill -TSTP $pid
  stopped() { grep -q '^[^)]*) T' /proc/$1/stat 2>/dev/null; }
  for _ in $(seq 100); do stopped $pid && break; sleep 0.1; done
  stopped $pid || fail "mixcclrun did not stop on SIGTSTP"
  sleep 0.3  # a tick begun before the stop lands first
  before=$(cat "$dir"/tick.0 "$dir"/tick.1)
  sleep 0.5
  [ "$(cat "$dir"/tick.0 "$dir"/tick.1)" = "$before" ] || fail "a rank kept running while the job was stopped"
  kill -CONT $pid
  for _ in $(seq 100); do [ "$(cat "$dir"/tick.0 "$dir"/tick.1)" != "$before" ] && break; sleep 0.1; done
  [ "$(cat "$dir"/tick.0 "$dir"/tick.1)" != "$before" ] || fail "the ranks did not continue after SIGCONT"
  touch "$dir/go"
  wait $pid
  expect_rc $? 0
  ;;
tag_output)
  "$run" -np 2 --tag-output sh -c 'echo a$RANK; echo b$RANK >&2; seq 20000; printf tail$RANK' \
    >"$dir/out" 2>"$dir/err"
  expect_rc $? 0
  for r in 0 1; do
    grep -qx "\[$r\] a$r" "$dir/out" || fail "no '[$r] a$r' on stdout"
    grep -qx "\[$r\] tail$r" "$dir/out" || fail "unterminated last line of rank $r lost"
    grep -qx "\[$r\] b$r" "$dir/err" || fail "no '[$r] b$r' on stderr"
    n=$(grep -c "^\[$r\] [0-9]*$" "$dir/out")
    [ "$n" = 20000 ] || fail "rank $r: $n of 20000 numbered lines"
  done
  grep -v '^\[[01]\] ' "$dir/out" && fail "untagged line on stdout"
  true
  ;;
usage)
  "$run" >"$dir/out" 2>"$dir/err"
  expect_rc $? 2
  expect_err "missing -np"
  for args in "-np 0 true" "-np -1 true" "-np x true" "--bogus -np 2 true" "-np 2" "-np 2 --timeout abc true" "-np"; do
    # shellcheck disable=SC2086
    "$run" $args >"$dir/out" 2>"$dir/err"
    expect_rc $? 2
    grep -q "^mixcclrun: " "$dir/err" || fail "no message for '$args'"
  done
  "$run" --help >"$dir/out" 2>"$dir/err"
  expect_rc $? 0
  grep -q "^usage: mixcclrun -np N" "$dir/out" || fail "--help prints no usage"
  "$run" --version >"$dir/out" 2>"$dir/err"
  expect_rc $? 0
  grep -qE '^mixcclrun from mixccl [0-9]+\.[0-9]+\.[0-9]+( \(git [0-9a-f]+\))?$' "$dir/out" ||
    fail "--version prints '$(cat "$dir/out")'"
  "$run" -np 2 /nonexistent/command >"$dir/out" 2>"$dir/err"
  expect_rc $? 127
  expect_err "cannot execute '/nonexistent/command'"
  ;;
no_orphans)
  # Killed with SIGKILL, mixcclrun forwards nothing; the parent-death signal must end the ranks.
  "$run" -np 2 sh -c 'echo $$ > $D/pid.$RANK; exec sleep 30' >"$dir/out" 2>"$dir/err" &
  pid=$!
  wait_files "$dir"/pid.{0,1}
  sleep 0.2  # let the ranks exec sleep
  kill -KILL $pid
  wait $pid 2>/dev/null
  for r in 0 1; do
    p=$(cat "$dir/pid.$r")
    for _ in $(seq 30); do gone "$p" && break; sleep 0.1; done
    gone "$p" || fail "rank $r (pid $p) outlived a killed mixcclrun"
  done
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "ok: $case_name"
