#!/usr/bin/env bash
# The whole GPU check in one call, on a machine with a GPU, nvcc and PyTorch
# but no Bazel (bench/gpu/bundle.sh packs .gpu-pack/ first):
#   1. every gpu-tagged test (GoogleTest XML and logs in $OUT/tests/),
#   2. compute-sanitizer memcheck and racecheck over them, where installed,
#   3. training steps side by side with PyTorch on the same GPU: ResNet-50
#      batch 128 at 224x224 with TF32 on (images/s, peak memory) and the
#      tutorial ConvNet batch 128 (step time),
#   4. the MNIST trainer for 2 epochs on cuda, eager and with --cuda-graph
#      (wall time, accuracy),
#   5. the split_size experiment in the tutorial's configuration on one GPU
#      (cuda:0,cuda:0).
# Every step runs even when an earlier one fails; a summary ends the output
# and $OUT/summary.txt.  Record the figures in bench/RESULTS.md.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-/tmp/loom-gpu-out}"
mkdir -p "$out/tests"
[[ -d .gpu ]] || tar -xJf .gpu-pack/gpu.tar.xz
# shellcheck disable=SC1091
source .gpu/env.sh
summary() { echo "$*" | tee -a "$out/summary.txt"; }
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
summary "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $(date -u +%F)"

passed=0 failed=0 skipped=0
for t in $(cat .gpu/tests.txt); do
  if .gpu/bin/"$t" --gtest_output=xml:"$out/tests/$t.xml" >"$out/tests/$t.log" 2>&1; then
    summary "test $t: ok"
  else
    summary "test $t: FAILED (see tests/$t.log)"
  fi
  n=$(grep -c '<testcase ' "$out/tests/$t.xml" 2>/dev/null)
  f=$(grep -c '<failure ' "$out/tests/$t.xml" 2>/dev/null)
  s=$(grep -c 'result="skipped"' "$out/tests/$t.xml" 2>/dev/null)
  passed=$((passed + ${n:-0} - ${f:-0} - ${s:-0})) failed=$((failed + ${f:-0})) skipped=$((skipped + ${s:-0}))
done
summary "gpu tests: $passed passed, $failed failed, $skipped skipped"

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [[ -n "$sanitizer" ]]; then
  for tool in memcheck racecheck; do
    bad=0
    for t in $(cat .gpu/tests.txt); do
      "$sanitizer" --tool "$tool" --error-exitcode 99 .gpu/bin/"$t" >"$out/tests/$t.$tool.log" 2>&1 || bad=$((bad + 1))
    done
    summary "compute-sanitizer $tool: $bad test binaries with errors"
  done
else
  summary "compute-sanitizer: not installed"
fi

step() {  # step NAME ARGS...: loom then torch, same flags
  local name="$1"; shift
  .gpu/bin/train_step --device cuda "$@" >"$out/$name.loom" 2>&1
  python3 bench/train_step.py --device cuda "$@" >"$out/$name.torch" 2>&1
  summary "$(tail -1 "$out/$name.loom")"
  summary "$(tail -1 "$out/$name.torch")"
}
step resnet50 --model resnet50 --batch 128 --size 224 --classes 1000 --iters 20 --warmup 5 --tf32 true
step convnet --model convnet --batch 128 --size 28 --iters 100 --warmup 10 --tf32 true

if [[ -d .gpu/data/mnist ]]; then
  start=$(date +%s%N)
  .gpu/bin/mnist_train --device cuda --epochs 2 --data-dir .gpu/data/mnist >"$out/mnist.log" 2>&1
  rc=$?
  summary "mnist --device cuda --epochs 2: exit $rc, $(( ($(date +%s%N) - start) / 1000000 )) ms wall, $(grep -i 'accuracy' "$out/mnist.log" | tail -1)"
  start=$(date +%s%N)
  .gpu/bin/mnist_train --device cuda --epochs 2 --cuda-graph --data-dir .gpu/data/mnist \
    >"$out/mnist_graph.log" 2>&1
  rc=$?
  summary "mnist --device cuda --epochs 2 --cuda-graph: exit $rc, $(( ($(date +%s%N) - start) / 1000000 )) ms wall, $(grep -i 'accuracy' "$out/mnist_graph.log" | tail -1)"
fi

.gpu/bin/split_size_experiment --devices cuda:0,cuda:0 --no-plot --out-dir "$out/split_size" \
  >"$out/split_size.log" 2>&1
summary "split_size_experiment (tutorial configuration, cuda:0,cuda:0): exit $? (table in split_size.log)"
cat "$out/summary.txt"
