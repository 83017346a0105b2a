#!/usr/bin/env bash
# `make bazel-test [BAZEL_TARGETS=...]`: runs `bazel test` offline on the given
# targets (default //...), first installing Debian's Bazel 4.2.3
# (bazel-bootstrap) and its rules_java (bazel-rules-java) when missing.
# The offline workspace itself is committed: WORKSPACE (local rules_java,
# rules_cc and remote_coverage_tools), .bazelrc (no downloads, venv Python
# toolchain) and tools/python_toolchain.bzl, which finds the interpreter at
# $ALBERT_TF_PYTHON or <repo>/.venv/bin/python. See docs/bazel.md.
set -euo pipefail
cd "$(dirname "$0")/.."

RULES_JAVA=/usr/share/bazel/rules/java

apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || {
      echo "[bazel-test] need root (or sudo) to apt-get install $*" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "[bazel-test] installing $* (apt-get)"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@"
}

missing=()
command -v bazel >/dev/null || missing+=(bazel-bootstrap)
[ -f "$RULES_JAVA/WORKSPACE" ] || missing+=(bazel-rules-java)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi

python="${ALBERT_TF_PYTHON:-$PWD/.venv/bin/python}"
if [ ! -x "$python" ]; then
  echo "[bazel-test] no Python at $python: run \`make venv\` or set ALBERT_TF_PYTHON" >&2
  exit 1
fi

if [ $# -eq 0 ]; then
  set -- //...
fi
echo "[bazel-test] bazel test $* (python: $python)"
start=$SECONDS
status=0
bazel test "$@" || status=$?
echo "[bazel-test] done in $((SECONDS - start)) s (exit $status)"
exit $status
