#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Installs the build into a temporary prefix, then builds and runs a consumer with
# find_package(mixccl) and one with pkg-config, both loading the installed libnccl.so.2. Then
# checks mixccl.pc for a Debian-style /usr install with a multiarch libdir and for an absolute
# libdir, where the pkgconfig folder is not two levels below the prefix.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
test -L "$tmp/prefix/lib/libnccl.so.2"
test -f "$tmp/prefix/include/nccl.h"
test -f "$tmp/prefix/share/doc/mixccl/LICENSE"
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

# A configure-only tree (nothing to compile) yields the mixccl.pc that a build configured this way
# installs. Staged as `DESTDIR=$tmp/root cmake --install` would place it, next to the headers and
# library installed above, every -I and -L it yields must name an existing folder.
configure_only() {
  cmake -S "$src_dir/../.." -B "$1" -DMIXCCL_BUILD_TESTS=OFF -DMIXCCL_BUILD_PERF=OFF -DCMAKE_INSTALL_PREFIX=/usr \
    "${@:2}" >/dev/null
}
configure_only "$tmp/multiarch" -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu
root=$tmp/root/usr
mkdir -p "$root/lib/x86_64-linux-gnu/pkgconfig"
cp -a "$tmp/prefix/include" "$root/include"
cp -a "$tmp/prefix/lib/"lib* "$root/lib/x86_64-linux-gnu/"
cp "$tmp/multiarch/mixccl.pc" "$root/lib/x86_64-linux-gnu/pkgconfig/"
flags=$(PKG_CONFIG_PATH="$root/lib/x86_64-linux-gnu/pkgconfig" pkg-config --cflags --libs mixccl)
for f in $flags; do
  case $f in
  -I* | -L*)
    d=${f:2}
    [ -d "$d" ] || { echo "install check: pkg-config gives $f for a multiarch libdir; $d does not exist"; exit 1; }
    ;;
  esac
done
cc -o "$tmp/consumer_multiarch" "$src_dir/consumer/consumer.c" $flags
LD_LIBRARY_PATH="$root/lib/x86_64-linux-gnu" "$tmp/consumer_multiarch"
# An absolute libdir lies outside the prefix: written as it is, not appended to the prefix.
configure_only "$tmp/abslibdir" -DCMAKE_INSTALL_LIBDIR=/opt/mixccl-lib
pc=$tmp/abslibdir/mixccl.pc
if ! grep -qx "libdir=/opt/mixccl-lib" "$pc" || ! grep -qx "prefix=/usr" "$pc" ||
  ! grep -qx 'includedir=${prefix}/include' "$pc"; then
  echo "install check: wrong mixccl.pc for CMAKE_INSTALL_LIBDIR=/opt/mixccl-lib:"
  cat "$pc"
  exit 1
fi
echo "install check: ok"
