#!/usr/bin/env bash
# Builds everything the GPU check runs and packs it for one device call:
#   bench/gpu/bundle.sh                                        # here
#   run(command="bash bench/gpu/run.sh", carry=[".gpu-pack"])  # on the GPU machine
# .gpu/ gets every gpu-tagged test, the training-step benchmark, the MNIST
# trainer, the split_size experiment, the version probe, the shared libraries
# they need that the GPU machine lacks (Gloo and its dependencies; cuDNN,
# cuBLAS, NCCL and the CUDA runtime come from that machine: /usr/local/cuda and
# its Python packages' nvidia/*/lib, see the env.sh written below), the MNIST
# IDX files (data/mnist, from tools/setup.sh) and the commit.  Then .gpu/ is
# compressed into .gpu-pack/gpu.tar.xz (both git-ignored); one xz stream with
# a large window stores the binaries' shared code about once, far under the
# device tool's 64 MiB carry limit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

fail() { echo "bundle: $*" >&2; exit 1; }
[[ -f data/mnist/train-images-idx3-ubyte || -f data/mnist/train-images-idx3-ubyte.gz ]] ||
  fail "no MNIST data in data/mnist: run tools/setup.sh first"

mapfile -t tests < <(bazel query 'attr(tags, "gpu", tests(//...))' 2>/dev/null)
((${#tests[@]} > 0)) || fail "bazel query found no gpu-tagged tests"
declare -A programs=(
  [//bench:train_step]=train_step
  [//bench/gpu:versions]=versions
  [//examples/mnist:train]=mnist_train
  [//examples/model_parallel:split_size_experiment]=split_size_experiment
)
bazel build "${tests[@]}" "${!programs[@]}"
bin="$(bazel info bazel-bin 2>/dev/null)"
path_of() { local t="${1#//}"; echo "$bin/${t%%:*}/${t##*:}"; }

rm -rf .gpu .gpu-pack
mkdir -p .gpu/bin .gpu/lib .gpu/data
copy_binary() {  # copy_binary PATH NAME
  [[ -x "$1" ]] || fail "not built: $1"
  [[ ! -e ".gpu/bin/$2" ]] || fail "two binaries are named $2"
  cp -L "$1" ".gpu/bin/$2"
  # Libraries the GPU machine may lack; the C/C++ runtime and the CUDA stack are there.
  local skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+|libgcc_s|libgomp|libcudnn|libcublas|libnccl|libcuda\.so|libcudart)'
  ldd "$1" | awk '/=> \//{print $1, $3}' | while read -r soname path; do
    [[ "$soname" =~ $skip || -e ".gpu/lib/$soname" ]] || cp -L "$path" ".gpu/lib/$soname"
  done
}
for t in "${tests[@]}"; do copy_binary "$(path_of "$t")" "${t##*:}"; done
for t in "${!programs[@]}"; do copy_binary "$(path_of "$t")" "${programs[$t]}"; done
printf '%s\n' "${tests[@]##*:}" | sort >.gpu/tests.txt
cp -r data/mnist .gpu/data/
{
  git rev-parse HEAD
  git diff --quiet HEAD -- . ':!bench/RESULTS.md' || echo "(with uncommitted changes)"
} >.gpu/COMMIT
cat >.gpu/env.sh <<'ENV'
# Sourced by bench/gpu/run.sh for loom's binaries only (PyTorch keeps the
# machine's own library path): the bundled libraries first, then the CUDA
# libraries of the machine's Python packages and toolkit.
gpu_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
loom_ld="$gpu_dir/lib"
for py in python3 /usr/bin/python3; do
  nv=$("$py" -c 'import nvidia, os; print(os.pathsep.join(nvidia.__path__))' 2>/dev/null) && break
done
IFS=: read -r -a nv_roots <<<"${nv:-}"
for root in "${nv_roots[@]}"; do
  for d in "$root"/*/lib; do [[ -d "$d" ]] && loom_ld="$loom_ld:$d"; done
done
[[ -d /usr/local/cuda/lib64 ]] && loom_ld="$loom_ld:/usr/local/cuda/lib64"
loom_ld="$loom_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ENV
mkdir -p .gpu-pack
tar -cf - .gpu | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >.gpu-pack/gpu.tar.xz
rm -rf .gpu
size=$(du -m .gpu-pack/gpu.tar.xz | cut -f1)
echo "bundle: .gpu-pack/gpu.tar.xz is ${size} MiB (carry limit 64 MiB), commit $(git rev-parse --short HEAD)"
((size < 56)) || fail "the pack is ${size} MiB: too close to the 64 MiB carry limit"
