#!/usr/bin/env bash
# tools/free_disk.sh on a fake Bazel output user root: it removes the output
# base of a loom workspace whose folder is gone (read-only files included),
# keeps the output base of a folder that exists and of another project, and
# reports the free space; with a free-space wish no disk can meet, it trims
# what the disk cache can give and warns instead of failing.
set -euo pipefail
script="$TEST_SRCDIR/loom/tools/free_disk.sh"
root="$TEST_TMPDIR/output_user_root"
cache="$TEST_TMPDIR/disk_cache"
fail() { echo "FAIL: $*" >&2; exit 1; }
trap 'chmod -R u+w "$root" 2>/dev/null || true' EXIT  # bazel must be able to clean up

make_base() {  # name workspace-folder workspace-name
  mkdir -p "$root/$1/execroot/$3/external/repo"
  echo "$2" >"$root/$1/DO_NOT_BUILD_HERE"
  echo "header" >"$root/$1/execroot/$3/external/repo/read_only.h"
  chmod -w "$root/$1/execroot/$3/external/repo/read_only.h" "$root/$1/execroot/$3/external/repo"
}
rm -rf "$root" "$cache"
mkdir -p "$TEST_TMPDIR/alive" "$cache/cas"
make_base gone "$TEST_TMPDIR/deleted_clone" loom
make_base alive "$TEST_TMPDIR/alive" loom
make_base other "$TEST_TMPDIR/deleted_other" other_project
truncate -s 1M "$cache/cas/old"

out=$(LOOM_BAZEL_OUTPUT_USER_ROOT="$root" LOOM_DISK_CACHE_DIR="$cache" "$script" 0)
[[ ! -e "$root/gone" ]] || fail "the orphaned loom output base is still there"
[[ -d "$root/alive" ]] || fail "removed the output base of a workspace that exists"
[[ -d "$root/other" ]] || fail "removed another project's output base"
grep -q "removed the output base of $TEST_TMPDIR/deleted_clone" <<<"$out" || fail "no removal report: $out"
grep -q "GiB free for the build (wanted 0)" <<<"$out" || fail "no free-space report: $out"
[[ -e "$cache/cas/old" ]] || fail "trimmed the disk cache with room to spare"

# No disk has a million GiB free: the cache is trimmed, a warning printed,
# and the script still succeeds (the build decides).
err=$(LOOM_BAZEL_OUTPUT_USER_ROOT="$root" LOOM_DISK_CACHE_DIR="$cache" "$script" 1000000 2>&1 >/dev/null)
grep -q "WARNING: less than 1000000 GiB free" <<<"$err" || fail "no warning: $err"
if LOOM_BAZEL_OUTPUT_USER_ROOT="$root" "$script" lots 2>/dev/null; then fail "accepted min_free_gib 'lots'"; fi
echo "PASS"
