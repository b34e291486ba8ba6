#!/usr/bin/env bash
# What the GPU machine (Ubuntu 24.04, no network, none of our -dev packages) lacks to build and test voltserve.
# Here: `scripts/gpu-deps.sh [fetch]` downloads Debian 12 .debs and Python 3.12 wheels into gpu-deps/ (ignored;
# carry it). There: `scripts/gpu-deps.sh unpack [PREFIX]` unpacks them into PREFIX and writes PREFIX/env.sh to source.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps=${VOLTSERVE_GPU_DEPS:-$root/gpu-deps}

# The build's Debian packages (cmake/Dependencies.cmake, server/http), each -dev with the runtime library its CMake
# or pkg-config files point at. spdlog and fmt are used header-only, but their CMake targets check that the
# libraries exist. libssl3 and libbrotli1 are fallbacks for libcpp-httplib: the machine normally has its own.
DEBS=(
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libutf8proc-dev libutf8proc2
  libcpp-httplib-dev libcpp-httplib0.11
  nlohmann-json3-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libcli11-dev
  libbrotli-dev
)
FALLBACK_DEBS=(libssl3 libbrotli1)  # unpacked aside; used only where the machine's loader lacks the library
BACKPORTS_DEBS=(libcatch2-dev)      # Catch2 v3 is in bookworm-backports only
# The openai and anthropic SDKs for tests/e2e and their dependency closure for CPython 3.12 (checked below against
# each wheel's Requires-Dist). These are the versions the e2e suites run with in CI; the machine's own copies of the
# shared dependencies are shadowed only for our processes (PYTHONPATH).
WHEELS=(
  openai==3.57.0 httpx2==2.16.2 httpcore2==2.16.2 h11==0.16.0 truststore==0.10.5 anyio==4.16.0 idna==3.20
  sniffio==1.3.1 jiter==0.19.0 pydantic==2.14.4 pydantic-core==2.50.5 typing-extensions==4.16.0
  typing-inspection==0.4.5 annotated-types==0.8.0
  anthropic==2.15.0 docstring-parser==0.18.0 opentelemetry-api==1.45.2
)
MULTIARCH=x86_64-linux-gnu

fetch() {
  command -v apt-get >/dev/null || { echo "gpu-deps: apt-get is needed here (Debian 12)" >&2; exit 1; }
  rm -rf "$deps.tmp"
  mkdir -p "$deps.tmp/debs" "$deps.tmp/fallback" "$deps.tmp/pc" "$deps.tmp/wheels"
  if ! grep -q 'bookworm-backports' <<<"$(apt-cache policy libcatch2-dev 2>/dev/null)"; then
    echo "gpu-deps: no bookworm-backports package lists; run scripts/setup.sh (or apt-get update) first" >&2
    exit 1
  fi
  local apt=(apt-get -qq -o APT::Sandbox::User=root download)
  (cd "$deps.tmp/debs" && "${apt[@]}" "${DEBS[@]}" && "${apt[@]}" -t bookworm-backports "${BACKPORTS_DEBS[@]}")
  (cd "$deps.tmp/fallback" && "${apt[@]}" "${FALLBACK_DEBS[@]}")
  # cpp-httplib.pc names openssl and zlib under Requires.private; pkg-config insists they exist even when linking
  # shared, where they add nothing. Stubs satisfy it (the runtime libraries are the machine's or the fallbacks).
  for pc in openssl:3.0.22 zlib:1.2.13; do
    printf 'Name: %s\nDescription: stub for Requires.private (scripts/gpu-deps.sh)\nVersion: %s\nLibs:\nCflags:\n' \
      "${pc%%:*}" "${pc#*:}" >"$deps.tmp/pc/${pc%%:*}.pc"
  done
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$deps.tmp/wheels" "${WHEELS[@]}"
  check_wheels "$deps.tmp/wheels"
  # XGrammar's pinned sdist: gpu-check.sh builds it there (scripts/xgrammar.sh checks its hash).
  mkdir -p "$deps.tmp/sdist"
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary xgrammar -d "$deps.tmp/sdist" \
    "xgrammar==$(sed -n 's/^XGRAMMAR_VERSION=//p' "$root/scripts/xgrammar.sh")"
  rm -rf "$deps" && mv "$deps.tmp" "$deps"
  (cd "$deps" && find debs fallback pc wheels sdist -type f | sort | xargs sha256sum >MANIFEST)
  echo "gpu-deps: $(find "$deps" -name '*.deb' | wc -l) .debs, $(find "$deps" -name '*.whl' | wc -l) wheels," \
       "$(du -sh "$deps" | cut -f1) in $deps (carry it: \"carry\": [\"gpu-deps\"])"
}

# Every wheel's Requires-Dist (markers evaluated for CPython 3.12 on Linux, extras skipped) must be met by the set.
check_wheels() {
  python3 - "$1" <<'PY'
import glob, os, re, sys, zipfile
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
from pip._vendor.packaging.version import Version
env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "extra": ""}
have, reqs = {}, []
for whl in sorted(glob.glob(os.path.join(sys.argv[1], "*.whl"))):
    with zipfile.ZipFile(whl) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    name = re.search(r"^Name: (.+)$", meta, re.M).group(1).strip()
    have[canonicalize_name(name)] = Version(re.search(r"^Version: (.+)$", meta, re.M).group(1).strip())
    reqs += [(name, Requirement(line[len("Requires-Dist:"):].strip()))
             for line in meta.splitlines() if line.startswith("Requires-Dist:")]
bad = []
for who, r in reqs:
    if r.marker is not None and not r.marker.evaluate(env):
        continue
    v = have.get(canonicalize_name(r.name))
    if v is None or not r.specifier.contains(v, prereleases=True):
        bad.append(f"{who} needs {r} (have {v or 'none'})")
if bad:
    sys.exit("gpu-deps: the wheel set is not closed:\n  " + "\n  ".join(bad))
print(f"gpu-deps: {len(have)} wheels, every Requires-Dist met for CPython 3.12")
PY
}

unpack() {
  local prefix=${1:-/tmp/vsdeps}
  case "$prefix" in
    /|/usr|/usr/*) echo "gpu-deps: refusing to unpack into '$prefix' (use a prefix of its own)" >&2; exit 1 ;;
  esac
  if [ ! -f "$deps/MANIFEST" ]; then
    echo "gpu-deps: no $deps/MANIFEST; run scripts/gpu-deps.sh on the dev machine and carry gpu-deps" >&2
    exit 1
  fi
  mkdir -p "$prefix"
  prefix=$(cd "$prefix" && pwd)
  # A warm machine keeps the prefix between calls: unpack again only when the carried set changed.
  if [ -f "$prefix/env.sh" ] && cmp -s "$deps/MANIFEST" "$prefix/MANIFEST"; then
    echo "gpu-deps: $prefix is up to date"
    return
  fi
  rm -rf "${prefix:?}/usr" "${prefix:?}/fallback" "${prefix:?}/site"
  local f
  for f in "$deps"/debs/*.deb; do dpkg -x "$f" "$prefix"; done
  local libdir=$prefix/usr/lib/$MULTIARCH
  mkdir -p "$libdir/pkgconfig"
  cp "$deps"/pc/*.pc "$libdir/pkgconfig/"
  # libssl3 / libbrotli1 only where the loader has none: the machine's own copies stay in use for its programs.
  local ld_extra=""
  for f in "$deps"/fallback/*.deb; do
    local lib
    case "$(basename "$f")" in libssl3_*) lib=libssl.so.3 ;; libbrotli1_*) lib=libbrotlicommon.so.1 ;; *) lib="" ;; esac
    if [ -n "$lib" ] && ! grep -qE "^[[:space:]]*${lib}[[:space:]]" <<<"$(/sbin/ldconfig -p 2>/dev/null)"; then
      dpkg -x "$f" "$prefix/fallback"
      ld_extra=":$prefix/fallback/usr/lib/$MULTIARCH"
      echo "gpu-deps: the machine has no $lib; using the carried one"
    fi
  done
  # The build does not need the wheels: a Python they do not fit costs the e2e suites only, so go on.
  if ! install_wheels "$prefix/site"; then
    echo "gpu-deps: WARNING: the CPython 3.12 wheels do not install for $("${PYTHON:-python3}" --version 2>&1);" \
         "the e2e suites that need the openai SDK will fail" >&2
  fi
  cat >"$prefix/env.sh" <<EOF
# Written by scripts/gpu-deps.sh unpack: the build and test environment over the unpacked prefix.
export VOLTSERVE_DEPS_PREFIX=$prefix
export PKG_CONFIG_SYSROOT_DIR=$prefix
export PKG_CONFIG_PATH=$libdir/pkgconfig:$prefix/usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
export CMAKE_PREFIX_PATH=$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}
export LD_LIBRARY_PATH=$libdir$ld_extra\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PYTHONPATH=$prefix/site\${PYTHONPATH:+:\$PYTHONPATH}
EOF
  cp "$deps/MANIFEST" "$prefix/MANIFEST"
  echo "gpu-deps: unpacked into $prefix; . $prefix/env.sh"
}

install_wheels() {
  local target=$1
  if "${PYTHON:-python3}" -m pip --version >/dev/null 2>&1; then
    PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1 "${PYTHON:-python3}" -m pip install -q \
      --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target" \
      "$deps"/wheels/*.whl || return 1
  else
    # No pip: these wheels need no build step, so extracting them is an install (without entry-point scripts).
    "${PYTHON:-python3}" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
      "$target" "$deps"/wheels/*.whl || return 1
  fi
  PYTHONPATH=$target "${PYTHON:-python3}" -c 'import openai, anthropic, pydantic_core, jiter' ||
    { echo "gpu-deps: the openai / anthropic SDKs do not import from $target" >&2; return 1; }
}

case "${1:-fetch}" in
  fetch) fetch ;;
  unpack) unpack "${2:-}" ;;
  -h|--help) sed -n '2,4p' "$0" ;;
  *) echo "usage: scripts/gpu-deps.sh [fetch | unpack [PREFIX]]" >&2; exit 2 ;;
esac
