#!/usr/bin/env bash
# Issue 18's CPU speed targets in one command: bfloat16 autocast training
# steps of loom and PyTorch 1.13 (python3-torch) side by side, each beside its
# own float32 step, on this machine:
#   bench/amp_table.sh [--rounds 2] [--kernels] [--quick]
# Rows: the ConvNet batch 128 28x28, ResNet-18 batch 32 64x64 and ResNet-50
# batch 16 224x224 steps of bench/train_step.{cpp,py} (forward and loss under
# autocast, backward, SGD momentum).  Every round runs each model's four
# sides back to back (loom bf16, PyTorch bf16, loom float32, PyTorch float32),
# so drift hits them alike; --rounds N repeats the whole table.  Targets:
# loom bf16 <= 0.8x PyTorch's bf16 step, and, where the CPU has AMX, loom's
# bf16 step >= 2x as fast as its float32 step.
# The head names the CPU, its AVX-512/AMX flags, the oneDNN build and
# instruction set each side's kernels run (loom: train_step's onednn= field;
# PyTorch: oneDNN's verbose info line), the threads and the load average.
# --kernels adds, per model and side, which oneDNN kernels one bf16 step ran
# (ONEDNN_VERBOSE=1 over a warm-up step and a timed one, loom's timed backend
# choices included): on an AMX machine every convolution should name
# avx512_core_amx.  --quick: one iteration each (a check that the script
# works, not a measurement).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=1
quick=0
kernels=0
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --kernels) kernels=1; shift ;;
    --quick) quick=1; shift ;;
    *) echo "amp_table.sh: unknown flag $1 (--rounds N, --kernels, --quick)" >&2; exit 2 ;;
  esac
done
bazel build -c opt //bench:train_step >/dev/null 2>&1 || bazel build -c opt //bench:train_step
bin="$(bazel info -c opt bazel-bin 2>/dev/null)/bench/train_step"
py=/usr/bin/python3
threads=2
field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
flags=$( (grep -o -w -E 'avx512f|avx512_bf16|amx_tile|amx_bf16' /proc/cpuinfo || true) | sort -u | tr '\n' ' ')
has_amx=0
grep -q -w amx_bf16 /proc/cpuinfo && has_amx=1
load=$(cut -d' ' -f1-3 /proc/loadavg)
torch_isa=$(ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 $py -c '
import torch
torch.set_num_threads(1)
with torch.autocast("cpu", dtype=torch.bfloat16):
    torch.nn.Conv2d(16, 16, 3)(torch.randn(1, 16, 8, 8))
print("torch", torch.__version__)' 2>&1 | sed -n 's/^onednn_verbose,info,cpu,isa://p; s/^dnnl_verbose,info,cpu,isa://p' | head -1)

# Models: name batch size classes iterations warm-up.
configs=("convnet 128 28 10 30 5" "resnet18 32 64 10 20 3" "resnet50 16 224 1000 6 2")
((quick)) && configs=("convnet 128 28 10 1 1" "resnet18 32 64 10 1 1" "resnet50 16 224 1000 1 1")
rows=()
verdicts=()
loom_isa=""
for ((r = 1; r <= rounds; ++r)); do
  for c in "${configs[@]}"; do
    read -r model batch size classes iters warmup <<<"$c"
    args=(--model "$model" --batch "$batch" --size "$size" --classes "$classes" --iters "$iters"
      --warmup "$warmup" --threads "$threads")
    lb_line=$(env -u OMP_NUM_THREADS "$bin" "${args[@]}" --amp bf16)
    tb=$($py bench/train_step.py "${args[@]}" --amp bf16 | field ms_per_step)
    lf=$(env -u OMP_NUM_THREADS "$bin" "${args[@]}" | field ms_per_step)
    tf=$($py bench/train_step.py "${args[@]}" | field ms_per_step)
    lb=$(field ms_per_step <<<"$lb_line")
    loom_isa=$(field onednn <<<"$lb_line")
    vs_torch=$(ratio "$lb" "$tb")
    loom_speedup=$(ratio "$lf" "$lb")
    rows+=("$(printf '| %s b%s %sx%s (round %s) | %s | %s | **%s** | %s | **%sx** | %s | %sx |' \
      "$model" "$batch" "$size" "$size" "$r" "$lb" "$tb" "$vs_torch" "$lf" "$loom_speedup" "$tf" \
      "$(ratio "$tf" "$tb")")")
    [[ "$model" == convnet ]] && continue  # the issue names the two ResNets
    v="$model round $r: loom bf16 / PyTorch bf16 = $vs_torch"
    if awk -v x="$vs_torch" 'BEGIN { exit !(x <= 0.8) }'; then v+=" (<= 0.8: met)"; else v+=" (<= 0.8: NOT met)"; fi
    v+="; loom float32 / bf16 = ${loom_speedup}x"
    if ((!has_amx)); then
      v+=" (>= 2x applies where the CPU has AMX: not here)"
    elif awk -v x="$loom_speedup" 'BEGIN { exit !(x >= 2) }'; then
      v+=" (>= 2x with AMX: met)"
    else
      v+=" (>= 2x with AMX: NOT met)"
    fi
    verdicts+=("$v")
  done
done

echo "CPU: $cpu; flags: ${flags:-no AVX-512/AMX}; $threads threads; load average before: $load"
echo "oneDNN: loom ${loom_isa:-?}; PyTorch $($py -c 'import torch; print(torch.__version__)') ${torch_isa:-?}"
((quick)) && echo "(--quick: one step each, not a measurement)"
echo
echo "| model (ms per step, median) | loom bf16 | PyTorch bf16 | loom / PyTorch (<= 0.8) | loom float32 | loom float32 / bf16 (>= 2 with AMX) | PyTorch float32 | PyTorch float32 / bf16 |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
printf '%s\n' "${verdicts[@]}"

if ((kernels)); then
  # Tally of oneDNN's executed primitives: "count primitive implementation pass".
  tally() { grep -E '^(onednn|dnnl)_verbose,exec' | awk -F, '$4 != "reorder" { print $4, $5, $6 }' |
    sort | uniq -c | sort -rn | sed 's/^/    /'; }
  for c in "${configs[@]}"; do
    read -r model batch size classes _ _ <<<"$c"
    args=(--model "$model" --batch "$batch" --size "$size" --classes "$classes" --iters 1
      --warmup 1 --threads "$threads" --amp bf16)
    echo
    echo "oneDNN kernels of a $model bf16 warm-up step and a timed one (count, primitive, implementation, pass):"
    echo "  loom:"
    ONEDNN_VERBOSE=1 env -u OMP_NUM_THREADS "$bin" "${args[@]}" 2>&1 | tally
    echo "  PyTorch:"
    ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 $py bench/train_step.py "${args[@]}" 2>&1 | tally
  done
fi
