#!/usr/bin/env bash
# Makes room for a build before tools/test.sh starts one.
#
# Bazel keeps one output base per workspace folder (5-16 GiB each for loom,
# the CUDA test binaries and the sanitizer build included) and never deletes
# one when its folder goes: every removed clone or worktree leaves its output
# base behind.  A CI run once failed with "No space left on device" on a
# machine where nine such orphans held 55 GiB.
#
#   tools/free_disk.sh [min_free_gib]
#
#   1. removes the output bases of loom workspaces whose folder no longer
#      exists (stopping their Bazel servers first); others are left alone
#   2. keeps the disk cache under its limit (tools/trim_disk_cache.sh)
#   3. when the disk still has less than min_free_gib free, trims the disk
#      cache further by the shortfall
#   4. prints the free space, and a warning when it is still short
#
# min_free_gib defaults to $LOOM_MIN_FREE_GB, else 20 (a full build of
# //... plus the sanitizer run needs about 15).  The output bases live in
# $LOOM_BAZEL_OUTPUT_USER_ROOT, else ~/.cache/bazel/_bazel_$USER.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$("$here/output_user_root.sh")"
cache="${LOOM_DISK_CACHE_DIR:-$HOME/.cache/loom-bazel-disk}"
min_free="${1:-${LOOM_MIN_FREE_GB:-20}}"
[[ "$min_free" =~ ^[0-9]+$ ]] || { echo "free_disk: min_free_gib must be a whole number, got '$min_free'" >&2; exit 2; }

free_gib() {  # free GiB on the filesystem holding $1 (or its nearest existing parent)
  local path="$1"
  while [[ ! -e "$path" ]]; do path="$(dirname "$path")"; done
  df -Pk "$path" | awk 'NR == 2 {printf "%d", $4 / 1048576}'
}

# 1. Orphaned output bases: DO_NOT_BUILD_HERE names the workspace folder, and
# execroot/loom says the workspace was loom's (workspace(name = "loom")).
if [[ -d "$root" ]]; then
  for base in "$root"/*/; do
    base="${base%/}"
    [[ -f "$base/DO_NOT_BUILD_HERE" && -d "$base/execroot/loom" ]] || continue
    workspace="$(head -n 1 "$base/DO_NOT_BUILD_HERE")"
    [[ -n "$workspace" && ! -d "$workspace" ]] || continue
    pid="$(cat "$base/server/server.pid.txt" 2>/dev/null || true)"
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
       && grep -qF "$base" "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    size="$(du -sm "$base" 2>/dev/null | cut -f1 || echo '?')"
    chmod -R u+w "$base" 2>/dev/null || true
    rm -rf -- "$base"
    echo "free_disk: removed the output base of $workspace (gone): $size MiB"
  done
fi

# 2. The disk cache's own limit.
"$here/trim_disk_cache.sh" || true

# 3. Still short: the disk cache gives up the shortfall (it is only a cache).
free="$(free_gib "$root")"
if ((free < min_free)) && [[ -d "$cache" ]]; then
  cache_gib=$(find "$cache" -type f -printf '%s\n' | awk '{s += $1} END {printf "%d", s / 1073741824}')
  keep=$((cache_gib - (min_free - free)))
  ((keep >= 1)) || keep=1
  "$here/trim_disk_cache.sh" "$keep" || true
  free="$(free_gib "$root")"
fi

# 4. Report.
echo "free_disk: $free GiB free for the build (wanted $min_free)"
if ((free < min_free)); then
  echo "free_disk: WARNING: less than $min_free GiB free; the build may fail with 'No space left on device'" >&2
fi
