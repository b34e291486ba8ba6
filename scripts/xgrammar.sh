#!/usr/bin/env bash
# Builds XGrammar (the structured-output grammar engine, engine/grammar/) from its pinned PyPI source distribution
# into a local prefix, once: the static C++ library and its headers, no Python bindings. Skipped when the prefix is
# complete, so it also works offline then. Called by scripts/setup.sh; scripts/gpu-check.sh passes a carried sdist.
#   scripts/xgrammar.sh [SDIST]   (SDIST: a local copy of the pinned tarball; otherwise pip downloads it)
# Prefix: $VOLTSERVE_XGRAMMAR_PREFIX, default ~/.cache/voltserve/xgrammar-<version> (CMake looks there too).
set -euo pipefail

XGRAMMAR_VERSION=0.1.34
XGRAMMAR_SHA256=ac72a4c3fdb56654bf904fce11cd7135d7cdba696e5d03039f90e1655b97ede4
prefix=${VOLTSERVE_XGRAMMAR_PREFIX:-$HOME/.cache/voltserve/xgrammar-$XGRAMMAR_VERSION}
PYTHON=${PYTHON:-python3}

if [ -f "$prefix/lib/libxgrammar.a" ] && [ -f "$prefix/include/xgrammar/xgrammar.h" ] &&
   [ -f "$prefix/include/dlpack/dlpack.h" ]; then
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sdist=${1:-}
if [ -z "$sdist" ]; then
  echo "setup: xgrammar $XGRAMMAR_VERSION sdist via pip"
  # --no-binary for xgrammar only: its build backend's own dependencies come as wheels (":all:" would build cmake).
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --no-binary xgrammar \
    -d "$work" "xgrammar==$XGRAMMAR_VERSION"
  sdist="$work/xgrammar-$XGRAMMAR_VERSION.tar.gz"
fi
got=$(sha256sum "$sdist" | cut -d' ' -f1)
if [ "$got" != "$XGRAMMAR_SHA256" ]; then
  echo "setup: $sdist has sha256 $got, expected $XGRAMMAR_SHA256 (xgrammar $XGRAMMAR_VERSION)" >&2
  exit 1
fi
tar -xzf "$sdist" -C "$work"
src="$work/xgrammar-$XGRAMMAR_VERSION"
[ -f "$src/CMakeLists.txt" ] && [ -d "$src/cpp" ] || { echo "setup: $sdist holds no C++ core" >&2; exit 1; }

echo "setup: building xgrammar $XGRAMMAR_VERSION (static C++ library) into $prefix"
mkdir -p "$src/build"
# The sdist's cmake/config.cmake turns the Python bindings on; a config.cmake in the build folder wins over it.
cat >"$src/build/config.cmake" <<'EOF'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
EOF
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# -fno-lto -Wno-error: its flags ask for -flto=auto (GCC bytecode in the archive, the optimisation moved into every
# link of ours) and -Werror (GCC 12 at -O3 warns maybe-uninitialized in structural_tag.cc); ours come last and win.
cmake -S "$src" -B "$src/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error" \
  -DCMAKE_INSTALL_PREFIX="$prefix.tmp" >/dev/null
cmake --build "$src/build" -j "${VOLTSERVE_XGRAMMAR_JOBS:-$(nproc)}"
rm -rf "$prefix.tmp"
cmake --install "$src/build" >/dev/null
rm -rf "$prefix" && mv "$prefix.tmp" "$prefix"
echo "setup: xgrammar $XGRAMMAR_VERSION in $prefix"
