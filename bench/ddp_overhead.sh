#!/usr/bin/env bash
# DDP overhead on CPU (2 ranks on this machine, one thread each by default):
#   bench/ddp_overhead.sh [--nproc 2] [flags of bench/ddp_overhead.cpp]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
nproc=2
if [[ "${1:-}" == "--nproc" ]]; then nproc="$2"; shift 2; fi
bazel build //bench:ddp_overhead //distributed/launch:loomrun >/dev/null 2>&1 ||
  bazel build //bench:ddp_overhead //distributed/launch:loomrun
bin="$(bazel info bazel-bin 2>/dev/null)"
env -u OMP_NUM_THREADS "$bin/distributed/launch/loomrun" --nproc_per_node "$nproc" \
  --master_port $((29600 + RANDOM % 300)) "$bin/bench/ddp_overhead" "$@" | sed -n 's/^\[rank0\]: //p'
