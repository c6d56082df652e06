#!/usr/bin/env bash
# Keeps Bazel's disk cache (~/.cache/loom-bazel-disk, see .bazelrc) under a
# size limit.  Bazel 4 never deletes from it, and each rebuild of the CUDA
# test binaries adds gigabytes: one day of work filled a 100 GB disk.  When
# the cache is over the limit, the least recently written files go first,
# down to three quarters of it (room for the build about to run).
#
#   tools/trim_disk_cache.sh [max_gib]
#
# max_gib defaults to $LOOM_DISK_CACHE_MAX_GB, else 48 (one full CI run,
# optimised and ASAN objects, writes ~32 GiB: a smaller bound dropped the
# objects the next clone needs, and every CI rebuilt from scratch); the folder is
# $LOOM_DISK_CACHE_DIR, else ~/.cache/loom-bazel-disk.  A missing folder is
# fine.  tools/test.sh runs this first.
set -euo pipefail
dir="${LOOM_DISK_CACHE_DIR:-$HOME/.cache/loom-bazel-disk}"
max_gib="${1:-${LOOM_DISK_CACHE_MAX_GB:-48}}"
[[ "$max_gib" =~ ^[0-9]+$ ]] || { echo "trim_disk_cache: max_gib must be a whole number, got '$max_gib'" >&2; exit 2; }
[[ -d "$dir" ]] || exit 0
limit=$((max_gib * 1024 * 1024 * 1024))
# %.0f, not %d: Debian's awk (mawk) clamps %d to 2^31 - 1, which read every
# cache over 2 GiB as 2 GiB and never trimmed it.
total=$(find "$dir" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')
((total > limit)) || exit 0
target=$((limit * 3 / 4))
before=$total
# "mtime size path", oldest first.
while read -r _ size path; do
  ((total > target)) || break
  rm -f -- "$path"
  total=$((total - size))
done < <(find "$dir" -type f -printf '%T@ %s %p\n' | sort -n)
echo "trim_disk_cache: $dir: $((before >> 20)) MiB -> $((total >> 20)) MiB (limit ${max_gib} GiB)"
