#!/usr/bin/env bash
# Builds everything a GPU session runs and packs it for one device call:
#   bench/gpu/bundle.sh                  # here: build, pack, compress
#   run(command="bash bench/gpu/run.sh", carry=[".gpu-pack"])   # GPU machine
# Packs every gpu-tagged test, the training-step benchmark, the MNIST and
# ResNet trainers, the split_size experiment and the MNIST IDX files
# (data/mnist) with ../shared/gpu/bundle.sh into .gpu/, then compresses .gpu/
# into .gpu-pack/gpu.tar.xz (both git-ignored).  Every binary links the same
# CUDA kernels, so one xz stream with a large window stores them about once:
# the archive stays under the device tool's 64 MiB carry limit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
shared="${LOOM_SHARED:-../shared}"
[[ -x "$shared/gpu/bundle.sh" ]] || { echo "bundle: $shared/gpu/bundle.sh not found" >&2; exit 1; }
mapfile -t tests < <(bazel query 'attr(tags, "gpu", tests(//...))' 2>/dev/null)
# target -> name in .gpu/bin
declare -A programs=(
  [//bench:train_step]=train_step
  [//examples/mnist:train]=mnist_train
  [//examples/resnet:train]=resnet_train
  [//examples/model_parallel:split_size_experiment]=split_size_experiment
)
bazel build "${tests[@]}" "${!programs[@]}"
bin="$(bazel info bazel-bin 2>/dev/null)"
links="$(mktemp -d)"
trap 'rm -rf "$links"' EXIT
path_of() { local t="${1#//}"; echo "$bin/${t%%:*}/${t##*:}"; }
for t in "${tests[@]}"; do
  name="${t##*:}"
  [[ ! -e "$links/$name" ]] || { echo "bundle: two gpu tests are named $name" >&2; exit 1; }
  ln -s "$(path_of "$t")" "$links/$name"
done
for t in "${!programs[@]}"; do ln -s "$(path_of "$t")" "$links/${programs[$t]}"; done
rm -rf .gpu .gpu-pack
"$shared/gpu/bundle.sh" "$links"/*
printf '%s\n' "${tests[@]##*:}" >.gpu/tests.txt
if [[ -f data/mnist/train-images-idx3-ubyte ]]; then
  mkdir -p .gpu/data && cp -r data/mnist .gpu/data/
fi
mkdir -p .gpu-pack
tar -cf - .gpu | xz -9e -T1 >.gpu-pack/gpu.tar.xz
rm -rf .gpu
du -m .gpu-pack/gpu.tar.xz | awk '{print "bundle: .gpu-pack/gpu.tar.xz is " $1 " MiB (carry limit 64 MiB)"}'
