#!/usr/bin/env bash
# Gloo all-reduce bus bandwidth on loopback, loom vs PyTorch 1.13's gloo
# backend, one after the other on this machine, both launched by loomrun.
#   bench/compare_allreduce.sh [--nproc 2] [extra flags for both sides]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
nproc=2
if [[ "${1:-}" == "--nproc" ]]; then nproc="$2"; shift 2; fi
bazel build //bench:allreduce_bench //distributed/launch:loomrun >/dev/null 2>&1 ||
  bazel build //bench:allreduce_bench //distributed/launch:loomrun
bin="$(bazel info bazel-bin 2>/dev/null)"
loomrun="$bin/distributed/launch/loomrun"
port=$((29600 + RANDOM % 300))
loom_out=$(env -u OMP_NUM_THREADS "$loomrun" --nproc_per_node "$nproc" --master_port "$port" \
  "$bin/bench/allreduce_bench" "$@" | sed -n 's/^\[rank0\]: //p')
torch_out=$(env -u OMP_NUM_THREADS "$loomrun" --nproc_per_node "$nproc" --master_port "$((port + 1))" \
  /usr/bin/python3 bench/allreduce_bench.py "$@" | sed -n 's/^\[rank0\]: //p')
echo "$loom_out"
echo "$torch_out"
echo "| bytes | loom µs | torch µs | loom GB/s | torch GB/s | loom / torch bandwidth |"
echo "|---|---|---|---|---|---|"
join <(sed -n 's/.*bytes=\([0-9]*\) us=\([0-9.]*\) busbw_GBps=\([0-9.]*\)/\1 \2 \3/p' <<<"$loom_out") \
     <(sed -n 's/.*bytes=\([0-9]*\) us=\([0-9.]*\) busbw_GBps=\([0-9.]*\)/\1 \2 \3/p' <<<"$torch_out") |
  awk '{ printf "| %d | %.1f | %.1f | %.3f | %.3f | %.2f |\n", $1, $2, $4, $3, $5, $3 / $5 }'
