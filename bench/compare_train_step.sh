#!/usr/bin/env bash
# Times one training step of a model in loom and in PyTorch 1.13 (python3-torch)
# on this machine, one after the other, and prints both and the ratio.
#   bench/compare_train_step.sh --model convnet --batch 128 --size 28 --threads 2
#   bench/compare_train_step.sh --model resnet18 --batch 32 --size 64 --threads 2
#   bench/compare_train_step.sh --model convnet --batch 128 --size 28 --threads 2 --amp bf16
# Extra flags go to both sides (see bench/train_step.cpp).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bazel build -c opt //bench:train_step >/dev/null 2>&1 || bazel build -c opt //bench:train_step
bin="$(bazel info -c opt bazel-bin 2>/dev/null)/bench/train_step"
loom_line=$(env -u OMP_NUM_THREADS "$bin" "$@")
torch_line=$(/usr/bin/python3 bench/train_step.py "$@")
echo "$loom_line"
echo "$torch_line"
loom_ms=$(sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p' <<<"$loom_line")
torch_ms=$(sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p' <<<"$torch_line")
awk -v l="$loom_ms" -v t="$torch_ms" 'BEGIN { printf "ratio loom/torch = %.3f (%s ms vs %s ms per step; < 1 means loom is faster)\n", l / t, l, t }'
