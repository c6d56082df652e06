#!/usr/bin/env bash
# Gloo all-reduce bus bandwidth on loopback, loom vs PyTorch 1.13's gloo
# backend on this machine, both launched by loomrun.
#   bench/compare_allreduce.sh [--nproc 2] [--pairs 3] [flags for both sides]
# The two sides run alternately --pairs times (loom, torch, loom, torch, ...),
# so slow phases of a shared machine hit both; each side's time per size is
# the best over its runs (each run already reports its best round).
# Flags only loom knows (e.g. --check-consistency false) go after --loom-only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
nproc=2
pairs=3
loom_only=()
both=()
while (($#)); do
  case "$1" in
    --nproc) nproc="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --loom-only) shift; loom_only=("$@"); break ;;
    *) both+=("$1"); shift ;;
  esac
done
bazel build //bench:allreduce_bench //distributed/launch:loomrun >/dev/null 2>&1 ||
  bazel build //bench:allreduce_bench //distributed/launch:loomrun
bin="$(bazel info bazel-bin 2>/dev/null)"
loomrun="$bin/distributed/launch/loomrun"
port=$((29600 + RANDOM % 300))
loom_out="" torch_out=""
for ((p = 0; p < pairs; ++p)); do
  loom_out+=$(env -u OMP_NUM_THREADS "$loomrun" --nproc_per_node "$nproc" --master_port "$port" \
    "$bin/bench/allreduce_bench" "${both[@]+"${both[@]}"}" "${loom_only[@]+"${loom_only[@]}"}" |
    sed -n 's/^\[rank0\]: //p')$'\n'
  torch_out+=$(env -u OMP_NUM_THREADS "$loomrun" --nproc_per_node "$nproc" --master_port "$((port + 1))" \
    /usr/bin/python3 bench/allreduce_bench.py "${both[@]+"${both[@]}"}" | sed -n 's/^\[rank0\]: //p')$'\n'
  port=$((port + 2))
done
echo "$loom_out"
echo "$torch_out"
# bytes -> best microseconds over the runs.
best() { sed -n 's/.*bytes=\([0-9]*\) us=\([0-9.]*\).*/\1 \2/p' | sort -k1,1n -k2,2g | awk '!seen[$1]++'; }
echo "ranks=$nproc, best of $pairs alternating runs per side"
echo "| bytes | loom µs | torch µs | loom GB/s | torch GB/s | loom / torch bandwidth |"
echo "|---|---|---|---|---|---|"
join <(best <<<"$loom_out" | sort -k1,1) <(best <<<"$torch_out" | sort -k1,1) | sort -k1,1n |
  awk -v n="$nproc" '{ f = 2.0 * (n - 1) / n / 1e3;
    printf "| %d | %.1f | %.1f | %.3f | %.3f | %.2f |\n", $1, $2, $3, $1 / $2 * f, $1 / $3 * f, $3 / $2 }'
