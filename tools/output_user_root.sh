#!/usr/bin/env bash
# Prints the folder holding Bazel's output bases: $LOOM_BAZEL_OUTPUT_USER_ROOT,
# else Bazel's default ~/.cache/bazel/_bazel_$USER.  tools/free_disk.sh
# removes orphaned output bases there, so every output base loom makes
# (tools/cuda_emu_test.sh's too) lives in it.
echo "${LOOM_BAZEL_OUTPUT_USER_ROOT:-$HOME/.cache/bazel/_bazel_${USER:-$(id -un)}}"
