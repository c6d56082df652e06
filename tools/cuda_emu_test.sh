#!/usr/bin/env bash
# Runs loom's gpu-tagged tests on the CPU, under the CUDA emulator
# (tools/cuda/emu/README.md), and ends with tools/test.sh's totals line.
#
#   tools/cuda_emu_test.sh                              # every gpu-tagged test
#   tools/cuda_emu_test.sh //tests/tensor:cuda_gemm_test
#   LOOM_CUDA_EMU_DEVICES=2 tools/cuda_emu_test.sh //tests/pipeline:cuda_pipe_test
#
# The emulated build has its own output base (LOOM_CUDA_EMU_OUTPUT_BASE,
# default ~/.cache/bazel-cuda-emu): LOOM_CUDA_EMULATE=1 changes every object
# that sees CUDA, and sharing the main output base would rebuild both ways
# in turn.  Flags and targets are passed on to tools/test.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

output_base="${LOOM_CUDA_EMU_OUTPUT_BASE:-$HOME/.cache/bazel-cuda-emu}"
args=("$@")
have_target=0
for a in "${args[@]+"${args[@]}"}"; do
  [[ "$a" == -* ]] || have_target=1
done
if ((have_target == 0)); then
  args+=(--test_tag_filters=gpu //tests/...)
fi

# The devices the emulated runtime reports reach the tests through the
# test environment; the build does not depend on them.
export LOOM_CUDA_EMULATE=1
LOOM_BAZEL_STARTUP="--output_base=$output_base ${LOOM_BAZEL_STARTUP:-}" \
  exec tools/test.sh --test_env=LOOM_CUDA_EMU_DEVICES \
  --test_env=LOOM_CUDA_EMU_MEMORY_MB "${args[@]}"
