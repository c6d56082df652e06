#!/usr/bin/env bash
# loom's whole GPU check in one device call (bench/gpu/bundle.sh packs first):
#   run(command="bash bench/gpu/run.sh", carry=[".gpu-pack"])            # ~7 min
#   run(command="bash bench/gpu/run.sh --quick", carry=[".gpu-pack"])    # ~3 min
# Steps, each under `timeout -k` and a deadline for the whole run, each
# printing its wall time:
#   1. what ran: commit, GPU, driver, the CUDA runtime/cuBLAS/cuDNN/NCCL
#      versions loom loaded; `ldd` of every bundled binary ("not found" fails);
#      a GPU that nvidia-smi lists but loom's CUDA runtime cannot see stops
#      the run here
#   2. every gpu-tagged test, counted per test case from its XML (a binary that
#      crashes or times out counts as one failure under its name)
#   3. training steps beside PyTorch on the same GPU: ResNet-50 batch 128
#      224x224 TF32, ResNet-50 batch 256 with fp16 autocast + GradScaler (issue
#      18's AMP target; loom channels last, PyTorch NCHW, each side's
#      default), the ConvNet batch 128 (PyTorch runs with the machine's own
#      library path, not the bundle's); then loom's AMP step NCHW and
#      PyTorch's in channels_last, for what the layout is worth
#   4. MNIST 1 epoch on cuda, eager and with --cuda-graph, beside the CPU's
#      accuracy for the same seed (not with --quick)
#   5. the split_size experiment on one GPU, both stages on cuda:0 (they
#      share its default stream, so this checks results and the pipeline's
#      overhead, not overlap; not with --quick)
#   6. the ResNet-50 fp16 AMP step op by op, loom's kernel profile beside
#      PyTorch's profiler (not with --quick; for diagnosis)
#   7. compute-sanitizer memcheck on the tests that cover loom's own kernels,
#      racecheck on two (not with --quick; last, in the time that is left)
# Output: $OUT/summary.txt and $OUT/results.tar.gz (every log, XML and CSV),
# written by an EXIT trap, so they come back even when a step hangs or the
# script is killed at its limit.  Without a GPU the same flow runs here in
# under 2 minutes (the tests report skipped; the benchmarks and MNIST run tiny
# CPU configurations) to prove the script before spending device time.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    *) echo "usage: bash bench/gpu/run.sh [--quick]" >&2; exit 2 ;;
  esac
done
out="${OUT:-/tmp/loom-gpu-out}"
gpu_dir="${LOOM_GPU_DIR:-.gpu}"  # a test points this at its own layout
work="$(mktemp -d "${TMPDIR:-/tmp}/loom-gpu.XXXXXX")"
mkdir -p "$out" "$work/tests"
: >"$out/summary.txt"
started=$SECONDS
budget=$((quick ? 180 : 480))   # seconds for every step together
failures=0

summary() { echo "$*" | tee -a "$out/summary.txt"; }
fail() { failures=$((failures + 1)); summary "FAILED: $*"; }
finish() {
  if [[ -s "$work/steps.txt" ]]; then
    echo "steps:" >>"$out/summary.txt"
    sed 's/^/  /' "$work/steps.txt" >>"$out/summary.txt"
  fi
  summary "total: $((SECONDS - started)) s, $failures failed step(s)"
  cp "$out/summary.txt" "$work/summary.txt"
  tar -czf "$out/results.tar.gz" -C "$work" . 2>/dev/null
  rm -rf "$work"
}
trap finish EXIT
trap 'summary "interrupted"; exit 130' INT TERM

# run_step NAME LIMIT CMD...: CMD under timeout -k, stdout+stderr in
# $work/NAME.log, its wall time printed; the limit shrinks to what is left of
# the budget.  Sets step_rc (124: timed out).
run_step() {
  local name="$1" limit="$2"; shift 2
  local left=$((budget - (SECONDS - started)))
  if ((left < 10)); then
    step_rc=125
    fail "$name: not run, out of time (budget ${budget} s)"
    return
  fi
  ((limit <= left)) || limit=$left
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >"$work/$name.log" 2>&1
  step_rc=$?
  local note=""
  ((step_rc != 124 && step_rc != 137)) || note=" (timed out at ${limit} s)"
  echo "step $name: exit $step_rc$note, $((SECONDS - t0)) s" | tee -a "$work/steps.txt"
}

# ---- 0. the pack ----------------------------------------------------------------
if [[ ! -d "$gpu_dir" && -f .gpu-pack/gpu.tar.xz ]]; then
  tar -xJf .gpu-pack/gpu.tar.xz || { fail "unpacking .gpu-pack/gpu.tar.xz"; exit 1; }
fi
[[ -f "$gpu_dir/tests.txt" ]] || { fail "no $gpu_dir (run bench/gpu/bundle.sh and carry .gpu-pack)"; exit 1; }
# shellcheck disable=SC1091
source "$gpu_dir/env.sh"
bin="$gpu_dir/bin"
loom=(env "LD_LIBRARY_PATH=$loom_ld")  # loom's binaries: bundled libraries first
torch_py=""
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import torch' 2>/dev/null; then torch_py="$py"; break; fi
done
has_gpu=0
nvidia-smi -L >/dev/null 2>&1 && has_gpu=1

# ---- 1. what ran ------------------------------------------------------------------
summary "loom commit: $(tr '\n' ' ' <"$gpu_dir/COMMIT")"
summary "date: $(date -u '+%F %T UTC'), mode: $( ((quick)) && echo quick || echo full)"
if ((has_gpu)); then
  summary "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  nvidia-smi >"$work/nvidia-smi.txt" 2>&1
else
  summary "gpu: none visible (nvidia-smi -L failed): dry run, GPU tests skip"
fi
run_step versions 30 "${loom[@]}" "$bin/versions"
summary "loaded by loom: $(grep -v '^loaded' "$work/versions.log" | grep -v '^device' | tr '\n' ';' | sed 's/;$//')"
grep '^loaded' "$work/versions.log" | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
if [[ -n "$torch_py" ]]; then
  summary "pytorch: $("$torch_py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1)"
else
  summary "pytorch: not importable here"
fi
missing=""
for b in "$bin"/*; do
  if LD_LIBRARY_PATH="$loom_ld" ldd "$b" 2>&1 | grep -q "not found"; then
    missing+=" $(basename "$b"):$(LD_LIBRARY_PATH="$loom_ld" ldd "$b" | awk '/not found/{print $1}' | tr '\n' ',')"
  fi
done
if [[ -n "$missing" ]]; then fail "libraries not found:$missing"; else summary "ldd: every bundled binary resolves"; fi
# nvidia-smi sees a GPU but loom's CUDA runtime does not (a driver older
# than the runtime needs, a bad library path): every GPU test would skip and
# read as passed, and every benchmark would fail, so stop here.
if ((has_gpu)) && ! grep -q '^cuda devices: [1-9]' "$work/versions.log"; then
  fail "loom's CUDA runtime sees no device although nvidia-smi does: $(grep '^cuda devices' "$work/versions.log" || echo 'no versions output'); stopping (the GPU tests would only skip)"
  exit 1
fi

# ---- 2. gpu-tagged tests ------------------------------------------------------------
test_limit=$((quick ? 60 : 90))
mapfile -t tests <"$gpu_dir/tests.txt"
for t in "${tests[@]}"; do
  rm -f "$work/tests/$t.xml"
  run_step "tests/$t" "$test_limit" "${loom[@]}" "$bin/$t" --gtest_output=xml:"$work/tests/$t.xml"
  echo "$step_rc" >"$work/tests/$t.rc"
done
python3 - "$work/tests" "${tests[@]}" >"$work/test_counts.txt" <<'PY'
# Counts test cases per binary from GoogleTest's XML; a binary without XML
# (crashed, timed out) or with a non-zero exit and no failed case counts as
# one failed case under its own name.
import sys, os, xml.etree.ElementTree as ET
d, names = sys.argv[1], sys.argv[2:]
tp = tf = ts = 0
lines = []
for n in names:
    rc = open(os.path.join(d, n + ".rc")).read().strip()
    p = f = s = 0
    bad = []
    try:
        root = ET.parse(os.path.join(d, n + ".xml")).getroot()
        for case in root.iter("testcase"):
            full = case.get("classname", "") + "." + case.get("name", "")
            if case.find("failure") is not None or case.find("error") is not None:
                f += 1; bad.append(full)
            elif case.get("result") == "skipped" or case.get("status") == "notrun" or case.find("skipped") is not None:
                s += 1
            else:
                p += 1
        if rc != "0" and f == 0:
            f += 1; bad.append(f"{n} (exit {rc}, no failed case in its XML)")
    except (OSError, ET.ParseError):
        f += 1; bad.append(f"{n} (exit {rc}, {'timed out' if rc in ('124', '137') else 'crashed or no XML'})")
    tp, tf, ts = tp + p, tf + f, ts + s
    lines.append(f"{n}: {p} passed, {f} failed, {s} skipped" + "".join(f"\n  FAILED {b}" for b in bad))
print("\n".join(lines))
print(f"gpu tests: {tp} passed, {tf} failed, {ts} skipped ({len(names)} binaries)")
PY
cat "$work/test_counts.txt" | grep -v ": 0 failed" | tee -a "$out/summary.txt" >/dev/null
grep -q "gpu tests: [0-9]* passed, 0 failed" "$work/test_counts.txt" || failures=$((failures + 1))

# ---- 3. training steps beside PyTorch ---------------------------------------------------
device=cuda
resnet=(--model resnet50 --batch 128 --size 224 --classes 1000 --iters 20 --warmup 5 --tf32 true)
resnet_amp=(--model resnet50 --batch 256 --size 224 --classes 1000 --iters 10 --warmup 5 --amp fp16)
convnet=(--model convnet --batch 128 --size 28 --iters 100 --warmup 10 --tf32 true)
if ((!has_gpu)); then  # the flow, on tiny CPU configurations
  device=cpu
  resnet=(--model resnet50 --batch 2 --size 32 --classes 10 --iters 1 --warmup 1)
  resnet_amp=(--model resnet50 --batch 2 --size 32 --classes 10 --iters 1 --warmup 1 --amp bf16)
  convnet=(--model convnet --batch 8 --size 28 --iters 2 --warmup 1)
fi
bench_pair() {  # bench_pair NAME ARGS...: loom, then PyTorch, same flags
  local name="$1"; shift
  run_step "bench/$name-loom" 120 "${loom[@]}" "$bin/train_step" --device "$device" "$@"
  local l="$step_rc" t=""
  if [[ -n "$torch_py" ]]; then
    run_step "bench/$name-torch" 120 "$torch_py" bench/train_step.py --device "$device" "$@"
    t="$step_rc"
  else
    summary "$name: PyTorch not importable, no side-by-side row"
  fi
  local ll tl
  ll=$(grep -h 'ms_per_step' "$work/bench/$name-loom.log" | tail -1)
  tl=$(grep -h 'ms_per_step' "$work/bench/$name-torch.log" 2>/dev/null | tail -1)
  [[ -n "$ll" ]] && summary "$ll" || fail "$name loom: exit $l, no result (bench/$name-loom.log)"
  if [[ -n "$tl" ]]; then
    summary "$tl"
  elif [[ -n "$t" ]]; then
    fail "$name PyTorch: exit $t: $(tail -1 "$work/bench/$name-torch.log")"
  fi
  if [[ -n "$ll" && -n "$tl" ]]; then
    awk -v a="$ll" -v b="$tl" 'BEGIN {
      match(a, /ms_per_step=[0-9.]+/); x = substr(a, RSTART + 12, RLENGTH - 12)
      match(b, /ms_per_step=[0-9.]+/); y = substr(b, RSTART + 12, RLENGTH - 12)
      printf "  loom / PyTorch step time: %.3f\n", x / y }' | tee -a "$out/summary.txt"
  fi
}
mkdir -p "$work/bench"
bench_pair resnet50 "${resnet[@]}"
bench_pair resnet50-amp "${resnet_amp[@]}"
bench_pair convnet "${convnet[@]}"
# The layouts beside the pair above (loom channels last by default, PyTorch
# NCHW): loom NCHW, and PyTorch with the model and input in channels_last.
if ((has_gpu)); then
  run_step bench/resnet50-amp-loom-nchw 120 "${loom[@]}" "$bin/train_step" --device "$device" \
    "${resnet_amp[@]}" --cudnn-channels-last 0
  [[ -n "$torch_py" ]] && run_step bench/resnet50-amp-torch-cl 120 "$torch_py" bench/train_step.py \
    --device "$device" "${resnet_amp[@]}" --channels-last
  for n in resnet50-amp-loom-nchw resnet50-amp-torch-cl; do
    l=$(grep -h 'ms_per_step' "$work/bench/$n.log" 2>/dev/null | tail -1)
    [[ -n "$l" ]] && summary "$l" || summary "$n: no result (bench/$n.log)"
  done
fi

# ---- 4. MNIST ---------------------------------------------------------------------------
if ((!quick)); then
  mkdir -p "$work/mnist"
  data="$gpu_dir/data/mnist"
  if [[ ! -f "$data/train-images-idx3-ubyte" && ! -f "$data/train-images-idx3-ubyte.gz" ]]; then
    fail "mnist: no data in $data (bundle.sh packs data/mnist; run tools/setup.sh before bundling)"
  else
    accuracy() { grep -o 'test accuracy [0-9.]*%' "$work/mnist/$1.log" | tail -1; }
    mnist=(--epochs 1 --seed 1 --save "" --data-dir "$data")
    run_step mnist/cpu 120 "${loom[@]}" "$bin/mnist_train" --device cpu "${mnist[@]}"
    if ((has_gpu)); then
      run_step mnist/cuda 120 "${loom[@]}" "$bin/mnist_train" --device cuda "${mnist[@]}"
      run_step mnist/cuda-graph 120 "${loom[@]}" "$bin/mnist_train" --device cuda --cuda-graph "${mnist[@]}"
    fi
    for m in cpu cuda cuda-graph; do
      [[ -f "$work/mnist/$m.log" ]] || continue
      a=$(accuracy "$m")
      [[ -n "$a" ]] && summary "mnist 1 epoch, seed 1, $m: ${a#test accuracy }" || fail "mnist $m: no accuracy (mnist/$m.log)"
    done
  fi
fi

# ---- 5. split_size on one GPU ----------------------------------------------------------------
if ((!quick)); then
  if ((has_gpu)); then
    split=(--devices cuda:0,cuda:0 --image-size 128 --batch-size 120 --num-batches 3 --num-classes 1000
           --split-sizes 10,20,40 --pipelined-split 20 --repeats 3 --warmup 1)
  else
    split=(--quick)
  fi
  run_step split_size 150 "${loom[@]}" "$bin/split_size_experiment" "${split[@]}" --no-plot --out-dir "$work/split_size"
  if ((step_rc == 0)); then
    summary "split_size ($(printf '%s ' "${split[@]}")):"
    sed -n '/^mode /,/^$/p' "$work/split_size.log" | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
  else
    fail "split_size: exit $step_rc (split_size.log)"
  fi
fi

# ---- 6. the AMP step op by op --------------------------------------------------------------
# Where loom's and PyTorch's ResNet-50 fp16 step spend their GPU time: loom's
# kernel profile synchronizes around every op (so its total is no step
# time), PyTorch's profiler gives each op's self GPU time.  After the
# figures: it is for diagnosis.
if ((!quick)); then
  mkdir -p "$work/profile"
  profile_args=("${resnet_amp[@]}" --profile)
  ((has_gpu)) && profile_args=(--model resnet50 --batch 256 --size 224 --classes 1000 --iters 3
    --warmup 3 --amp fp16 --profile)
  run_step profile/resnet50-amp-loom 120 "${loom[@]}" "$bin/train_step" --device "$device" "${profile_args[@]}"
  if ((step_rc == 0)); then
    summary "resnet50-amp op by op, loom (ms per step, GPU time with the device synchronized around each op):"
    grep '^profile' "$work/profile/resnet50-amp-loom.log" | head -24 | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
  else
    fail "profile/resnet50-amp-loom: exit $step_rc"
  fi
  if [[ -n "$torch_py" ]]; then
    run_step profile/resnet50-amp-torch 120 "$torch_py" bench/train_step.py --device "$device" "${profile_args[@]}"
    if ((step_rc == 0)); then
      summary "resnet50-amp op by op, PyTorch (ms per step, self GPU time):"
      grep '^profile' "$work/profile/resnet50-amp-torch.log" | head -24 | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
    else
      fail "profile/resnet50-amp-torch: exit $step_rc"
    fi
  fi
fi

# ---- 7. compute-sanitizer ------------------------------------------------------------
# Last, in whatever time is left: the figures and the run's other checks come
# first (on H200 machines under gVisor the sanitizer is unavailable anyway).
# cuda_elementwise_test (unary/binary tables, dtype conversion), cuda_reduce_test,
# cuda_norm_pool_test (batch norm, pooling), cuda_softmax_loss_test, cuda_index_test;
# optimizers and conv through cuda_update_test and cuda_conv_test where time allows.
sanitize() {  # sanitize TOOL TEST [extra flags]
  local tool="$1" t="$2"; shift 2
  [[ -x "$bin/$t" ]] || { summary "compute-sanitizer $tool $t: no such test binary"; return; }
  # memcheck sees an allocation's bounds: without loom's cache each tensor is one.
  local uncached=()
  [[ "$tool" == memcheck ]] && uncached=(LOOM_CUDA_NO_CACHING=1)
  run_step "sanitizer/$tool-$t" 120 "${loom[@]}" "${uncached[@]+"${uncached[@]}"}" "$sanitizer" \
    --tool "$tool" --error-exitcode 99 "$@" "$bin/$t"
  local log="$work/sanitizer/$tool-$t.log"
  if grep -q "Device not supported\|not supported on this platform" "$log"; then
    sanitizer_unavailable=1
    summary "compute-sanitizer: sanitizer unavailable on this machine ($(grep -m1 'not supported' "$log"))"
  elif ((step_rc == 0)); then
    summary "compute-sanitizer $tool $t: clean ($(grep -m1 'ERROR SUMMARY' "$log"))"
  else
    fail "compute-sanitizer $tool $t: exit $step_rc, $(grep -m1 'ERROR SUMMARY' "$log" || echo 'see its log')"
  fi
}
if ((!quick)); then
  mkdir -p "$work/sanitizer"
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  sanitizer_unavailable=0
  if ((!has_gpu)); then
    summary "compute-sanitizer: skipped, no GPU on this machine"
  elif [[ -z "$sanitizer" ]]; then
    summary "compute-sanitizer: not installed on this machine"
  else
    for t in cuda_elementwise_test cuda_norm_pool_test cuda_batch_norm_channels_last_test \
      cuda_max_pool_test cuda_softmax_loss_test; do
      sanitize memcheck "$t" --report-api-errors no
      ((sanitizer_unavailable)) && break
    done
    # The new shared-memory reductions first (the emulator cannot see races
    # between a block's threads).
    for t in cuda_batch_norm_channels_last_test cuda_reduce_test; do
      ((sanitizer_unavailable)) || sanitize racecheck "$t"
    done
  fi
fi

((failures == 0))
