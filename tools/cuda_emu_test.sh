#!/usr/bin/env bash
# Runs loom's gpu-tagged tests on the CPU, under the CUDA emulator
# (tools/cuda/emu/README.md), and ends with tools/test.sh's totals line.
#
#   tools/cuda_emu_test.sh                              # every gpu-tagged test
#   tools/cuda_emu_test.sh //tests/tensor:cuda_gemm_test
#   LOOM_CUDA_EMU_DEVICES=2 tools/cuda_emu_test.sh //tests/pipeline:cuda_pipe_test
#   LOOM_CUDA_EMU_GUARD=1 LOOM_CUDA_NO_CACHING=1 tools/cuda_emu_test.sh   # bounds checks
#
# The emulated build has its own output base (LOOM_CUDA_EMU_OUTPUT_BASE,
# default emu-<this checkout's path hashed> beside Bazel's own output bases,
# where tools/free_disk.sh removes it once the checkout is gone):
# LOOM_CUDA_EMULATE=1 changes every object that sees CUDA, and sharing the
# main output base would rebuild both ways in turn.  Bazel's disk cache is
# shared, so a second checkout builds from cache.  Flags and targets are
# passed on to tools/test.sh.  --print-output-base prints the output base.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

output_base="${LOOM_CUDA_EMU_OUTPUT_BASE:-$(tools/output_user_root.sh)/emu-$(pwd -P | md5sum | cut -c1-16)}"
if [[ "${1:-}" == "--print-output-base" ]]; then
  echo "$output_base"
  exit 0
fi
args=("$@")
have_target=0
for a in "${args[@]+"${args[@]}"}"; do
  [[ "$a" == -* ]] || have_target=1
done
if ((have_target == 0)); then
  # --build_tests_only: build the gpu-tagged tests alone, not every target
  # under //tests (the emulated build of all of them took minutes more).
  args+=(--test_tag_filters=gpu --build_tests_only //tests/...)
fi

# The devices the emulated runtime reports reach the tests through the
# test environment; the build does not depend on them.
export LOOM_CUDA_EMULATE=1
LOOM_BAZEL_STARTUP="--output_base=$output_base ${LOOM_BAZEL_STARTUP:-}" \
  exec tools/test.sh --test_env=LOOM_CUDA_EMU_DEVICES \
  --test_env=LOOM_CUDA_EMU_MEMORY_MB --test_env=LOOM_CUDA_EMU_GUARD \
  --test_env=LOOM_CUDA_NO_CACHING "${args[@]}"
