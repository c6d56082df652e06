#!/usr/bin/env bash
# The MNIST trainer with its default flags (examples/mnist:train: 2 epochs,
# batch 128, one DataLoader worker, all cores) beside PyTorch 1.13's bare
# loop on the same data (bench/mnist_loop.py), alternately --pairs times;
# compares the training loops (evaluation excluded on both sides).
#   bench/compare_mnist_loop.sh [--pairs 2] [extra flags for loom's trainer]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pairs=2
if [[ "${1:-}" == "--pairs" ]]; then pairs="$2"; shift 2; fi
[[ -f data/mnist/train-images-idx3-ubyte || -f data/mnist/train-images-idx3-ubyte.gz ]] ||
  node tools/make_mnist_idx.js >/dev/null
bazel build -c opt //examples/mnist:train >/dev/null 2>&1 || bazel build -c opt //examples/mnist:train
bin="$(bazel info -c opt bazel-bin 2>/dev/null)/examples/mnist/train"
threads=$(nproc)
for ((p = 0; p < pairs; ++p)); do
  loom_s=$(env -u OMP_NUM_THREADS "$bin" --save "" "$@" |
    sed -n 's/.*(training loops \([0-9.]*\) s).*/\1/p')
  torch_line=$(/usr/bin/python3 bench/mnist_loop.py --threads "$threads")
  torch_s=$(sed -n 's/.*training_loops_s=\([0-9.]*\).*/\1/p' <<<"$torch_line")
  awk -v l="$loom_s" -v t="$torch_s" -v f="$*" 'BEGIN {
    printf "mnist 2-epoch training loops: loom %.2f s (trainer defaults %s) vs torch bare loop %.2f s: ratio %.3f\n", l, f, t, l / t }'
done
