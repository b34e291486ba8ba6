#!/usr/bin/env bash
# Prints the distribution packages that hold the shared libraries BINARY links (ldd), one per line, leaving out
# what every base image has (libc, libgcc, libstdc++) and the CUDA libraries (the CUDA runtime image has them).
# The images' build stages write this list and their runtime stages install exactly it. Usage: runtime-packages.sh BINARY
set -euo pipefail
ldd "$1" | awk '/=> \// { print $3 }' | while read -r lib; do
  real=$(readlink -f "$lib")
  # dpkg knows a file by the path its package installed: /usr/lib/... or, before the /usr merge, /lib/...
  dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || echo "runtime-packages: no package holds $lib" >&2
done | cut -d: -f1 | sort -u | { grep -v -E '^(libc6|libgcc-s1|libstdc\+\+6|libcublas|libcudart|cuda-)' || true; }
