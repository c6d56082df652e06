#!/usr/bin/env bash
# DDP overhead on CPU (2 ranks on this machine, one thread each by default):
#   bench/ddp_overhead.sh [--nproc 2] [--with-torch] [flags of bench/ddp_overhead.cpp]
# --with-torch also runs PyTorch 1.13's DDP on the same ConvNet with the same
# method (bench/ddp_overhead.py; it reads --batch --size --rounds --block
# --warmup --threads --broadcast-buffers and ignores loom-only flags).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
nproc=2
with_torch=0
args=()
while (($#)); do
  case "$1" in
    --nproc) nproc="$2"; shift 2 ;;
    --with-torch) with_torch=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
bazel build //bench:ddp_overhead //distributed/launch:loomrun >/dev/null 2>&1 ||
  bazel build //bench:ddp_overhead //distributed/launch:loomrun
bin="$(bazel info bazel-bin 2>/dev/null)"
port=$((29600 + RANDOM % 300))
env -u OMP_NUM_THREADS "$bin/distributed/launch/loomrun" --nproc_per_node "$nproc" \
  --master_port "$port" "$bin/bench/ddp_overhead" "${args[@]+"${args[@]}"}" | sed -n 's/^\[rank0\]: //p'
if ((with_torch)); then
  env -u OMP_NUM_THREADS "$bin/distributed/launch/loomrun" --nproc_per_node "$nproc" \
    --master_port "$((port + 1))" /usr/bin/python3 bench/ddp_overhead.py "${args[@]+"${args[@]}"}" |
    sed -n 's/^\[rank0\]: //p'
fi
