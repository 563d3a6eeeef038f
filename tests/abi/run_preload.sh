#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
#
# Drives the preload check (preload.c): the program is linked against NVIDIA's libnccl.so.2.
#   run_preload.sh ours    EXE OUR_LIB REAL_LIB   LD_PRELOAD=OUR_LIB: must pass, served by OUR_LIB
#   run_preload.sh without EXE OUR_LIB REAL_LIB   no preload: NVIDIA's library must refuse (no GPU)
# Exit 77 (registered as CTest's SKIP_RETURN_CODE) when NVIDIA's library is not there.
mode=$1
exe=$2
ours=$3
real=$4
if [ -z "$real" ] || [ ! -e "$real" ] || [ ! -x "$exe" ]; then
  echo "SKIP: NVIDIA's libnccl.so.2 (or the preload program) is not available: '$real'"
  exit 77
fi
case "$mode" in
  ours)
    LD_PRELOAD="$ours" "$exe" --expect-provider "$ours"
    rc=$?
    if [ "$rc" -eq 0 ]; then
      echo "OK: the NVIDIA-linked program ran on $ours"
      exit 0
    fi
    echo "FAIL: with LD_PRELOAD=$ours the program exited with $rc"
    exit 1
    ;;
  without)
    env -u LD_PRELOAD "$exe" --expect-provider "$real"
    rc=$?
    case "$rc" in
      0) echo "FAIL: NVIDIA's library completed the host-memory all-reduce; expected it to fail"; exit 1 ;;
      2) echo "OK: without the preload NVIDIA's library fails, as expected"; exit 0 ;;
      3) echo "FAIL: setup error (wrong library loaded?)"; exit 1 ;;
      *) echo "FAIL: unexpected exit status $rc"; exit 1 ;;
    esac
    ;;
  *)
    echo "usage: run_preload.sh ours|without EXE OUR_LIB REAL_LIB"
    exit 2
    ;;
esac
