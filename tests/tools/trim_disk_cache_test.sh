#!/usr/bin/env bash
# tools/trim_disk_cache.sh on sparse files (sizes count, not blocks, so a
# few GiB of cache cost no disk): over the limit it deletes the oldest files
# down to 3/4 of it; at or under the limit it deletes nothing.  Totals above
# 2 GiB are the case mawk's printf %d once clamped (the cache never shrank).
set -euo pipefail
script="$TEST_SRCDIR/loom/tools/trim_disk_cache.sh"
dir="$TEST_TMPDIR/cache"
fail() { echo "FAIL: $*" >&2; exit 1; }

make_files() {  # name:GiB ... oldest first
  rm -rf "$dir" && mkdir -p "$dir/ac" "$dir/cas"
  local age=100
  for spec in "$@"; do
    local name="${spec%%:*}" gib="${spec##*:}"
    truncate -s "$((gib * 1024 / 4))M" "$dir/cas/$name"  # gib is in quarters of a GiB
    touch -d "-${age} minutes" "$dir/cas/$name"
    age=$((age - 10))
  done
}

# 2.5 GiB in five files, limit 2 GiB: keep the newest 1.5 GiB.
make_files a:2 b:2 c:2 d:2 e:2
LOOM_DISK_CACHE_DIR="$dir" "$script" 2 | grep -q "2560 MiB -> 1536 MiB" || fail "no trim report"
[[ ! -e "$dir/cas/a" && ! -e "$dir/cas/b" ]] || fail "the oldest files are still there"
[[ -e "$dir/cas/c" && -e "$dir/cas/d" && -e "$dir/cas/e" ]] || fail "a newer file was deleted"

# At the limit: nothing goes, nothing is printed.
make_files a:4 b:4
out=$(LOOM_DISK_CACHE_DIR="$dir" "$script" 2)
[[ -z "$out" && -e "$dir/cas/a" && -e "$dir/cas/b" ]] || fail "trimmed a cache at its limit"

# The limit from the environment; a missing folder is fine; bad input fails.
make_files a:4 b:4 c:4
LOOM_DISK_CACHE_DIR="$dir" LOOM_DISK_CACHE_MAX_GB=2 "$script" >/dev/null
[[ ! -e "$dir/cas/a" && -e "$dir/cas/c" ]] || fail "LOOM_DISK_CACHE_MAX_GB was not used"
LOOM_DISK_CACHE_DIR="$dir/missing" "$script" 2 || fail "a missing folder is an error"
if LOOM_DISK_CACHE_DIR="$dir" "$script" lots 2>/dev/null; then fail "accepted max_gib 'lots'"; fi
echo "PASS"
