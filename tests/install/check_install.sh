#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Installs the build into a temporary prefix, then builds and runs a consumer with
# find_package(mixccl) and one with pkg-config, both loading the installed libnccl.so.2.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
test -L "$tmp/prefix/lib/libnccl.so.2"
test -f "$tmp/prefix/include/nccl.h"
cmake -S "$src_dir/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/consumer"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs mixccl)
cc -o "$tmp/consumer_pc" "$src_dir/consumer/consumer.c" $flags
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer_pc"
# The consumer must resolve NCCL's soname to the installed mixccl. ldd's output is captured
# first: with pipefail, `ldd | grep -q` fails at random when grep exits before ldd is done.
deps=$(LD_LIBRARY_PATH="$tmp/prefix/lib" ldd "$tmp/consumer_pc")
grep -q "libnccl.so.2 => $tmp/prefix/lib/libnccl.so.2" <<<"$deps"
echo "install check: ok"
