#!/usr/bin/env bash
# loom's test command: runs `bazel test` and prints the total of test cases.
#
#   tools/test.sh                                   # every test: //...
#   tools/test.sh //tests/autograd/...              # some of them
#   tools/test.sh --config=asan //tests/tensor/...  # flags in --flag=value form
#
# Keeps going past failures, then counts the GoogleTest cases of exactly this
# run (tools/test_summary.py reads bazel's build event file, so results of
# earlier runs left in bazel-testlogs never count) and ends with the line
#   N passed, N failed[, N skipped]
# Exits non-zero when a case failed, when bazel failed (a target that does not
# build), or when no test case ran.
#
# Environment:
#   BAZEL                 the bazel binary (default: bazel)
#   LOOM_BAZEL_STARTUP    startup options, e.g. "--output_base=$HOME/.cache/ob-ci"
#   LOOM_TEST_TOTALS      also write "passed failed skipped" to this file
#   LOOM_TEST_EVENTS      keep bazel's build event file (JSON lines) here
#   LOOM_DISK_CACHE_MAX_GB  bound on bazel's disk cache (default 48; trimmed
#                         first, by tools/trim_disk_cache.sh)
#   LOOM_MIN_FREE_GB      free disk wanted before the build (default 20;
#                         tools/free_disk.sh)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Bazel never shrinks its disk cache nor deletes the output base of a removed
# clone: make room first (tools/free_disk.sh, which runs trim_disk_cache.sh).
tools/free_disk.sh || true

bazel_bin="${BAZEL:-bazel}"
read -r -a startup <<<"${LOOM_BAZEL_STARTUP:-}"
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3

args=("$@")
have_target=0
for a in "${args[@]+"${args[@]}"}"; do
  [[ "$a" == -* && "$a" != -//* ]] || have_target=1
done
((have_target)) || args+=(//...)

if [[ -n "${LOOM_TEST_EVENTS:-}" ]]; then
  events="$LOOM_TEST_EVENTS"
else
  events="$(mktemp "${TMPDIR:-/tmp}/loom-test-events.XXXXXX")"
  trap 'rm -f "$events"' EXIT
fi

echo "test.sh: bazel ${startup[*]+"${startup[*]} "}test --keep_going --test_output=errors ${args[*]}"
start=$SECONDS
set +e
"$bazel_bin" "${startup[@]+"${startup[@]}"}" test --keep_going --test_output=errors \
  --build_event_json_file="$events" "${args[@]}"
bazel_rc=$?
set -e
echo "test.sh: bazel exited with $bazel_rc after $((SECONDS - start)) s"

totals=()
[[ -n "${LOOM_TEST_TOTALS:-}" ]] && totals=(--totals "$LOOM_TEST_TOTALS")
set +e
"$python" tools/test_summary.py "$events" --bazel-exit-code="$bazel_rc" "${totals[@]+"${totals[@]}"}"
summary_rc=$?
set -e

if ((bazel_rc != 0 || summary_rc != 0)); then
  exit 1
fi
