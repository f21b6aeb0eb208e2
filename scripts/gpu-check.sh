#!/usr/bin/env bash
# Every GPU check of issue 14 in one run on the lent GPU machine (one H200, CUDA 13 toolkit,
# CMake, PyTorch; none of our -dev packages; no network): about 5 minutes, at most 7 (each step
# has a timeout: kernels 120 s, PyTorch 300 s).
#   1. the machine: nvidia-smi, nvcc, torch;
#   2. test_kernels_cuda from gpu-bundle/ (scripts/gpu-bundle.sh, built on a build machine and
#      carried here): every CUDA kernel against the double references, dropout masks against the
#      CPU's bit for bit. A skipped test here is a failure: the GPU is supposed to be there;
#   3. test_comm_nccl: the NCCL communicator, one rank on the GPU;
#   4. the PyTorch baseline of the speed check (tools/torch_gpt2_gpu.py): gpt2-small, seq 1024,
#      bf16, eager and torch.compile, largest micro-batch that fits, tokens/s and MFU.
# Everything goes to $OUT (the device tool's output folder) or gpu-check-out/: gpu-check.log,
# kernels_cuda.txt/.xml, comm_nccl.txt/.xml (GoogleTest's reports), torch_gpt2.json. Exit 0 only when every check ran and
# passed; 2 when there is no GPU (on a build machine: the bundle is checked, nothing else runs).
# After the NCCL check, the single-process training stages (scripts/gpu-train-stages.sh: one
# step against the CPU bf16 trainer, recompute, a checkpoint across devices) run on --device cuda
# through gpu-bundle/bin/eth.
# Usage: scripts/gpu-bundle.sh here, then on the GPU machine: bash scripts/gpu-check.sh
#
# scripts/gpu-check.sh --emulated [BUILD_DIR]: on any machine, the training stages alone on the
# host-emulated GPU (--device emulated) through BUILD_DIR/src/cli/eth (default build-test/), so
# the script's training half has run before it meets a GPU; scripts/test.sh runs it. Seconds.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=gpu-train-stages.sh
source "$root/scripts/gpu-train-stages.sh"
if [ "${1:-}" = "--emulated" ]; then
  build=${2:-$root/build-test}
  out=${OUT:-$root/gpu-check-out}/emulated
  mkdir -p "$out"
  start=$(date +%s)
  echo "== gpu-check --emulated $(date -u +%FT%TZ): the training stages on the emulated device"
  [ -x "$build/src/cli/eth" ] || { echo "no $build/src/cli/eth: build it first"; exit 1; }
  gpu_train_stages "$build/src/cli/eth" emulated "$out" 2>&1 | tee "$out/gpu-check.log"
  status=${PIPESTATUS[0]}
  echo "== gpu-check --emulated finished in $(( $(date +%s) - start )) s, status $status"
  exit "$status"
fi
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
start=$(date +%s)
status=0
echo "== gpu-check $(date -u +%FT%TZ) on $(hostname)"
cat "$root/gpu-bundle/MANIFEST" 2>/dev/null || { echo "no gpu-bundle/: run scripts/gpu-bundle.sh on a build machine first"; exit 1; }

echo "== 1. machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 || true
command -v nvcc >/dev/null && nvcc --version | tail -1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 || true
grep -m1 'model name' /proc/cpuinfo; ldd --version | head -1

# cuBLASLt 13 and NCCL 2: the toolkit's, else the ones PyTorch's wheels carry.
candidates=("${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
            $(python3 -c 'import nvidia, os; [print(os.path.join(p, s, "lib")) for p in nvidia.__path__ for s in os.listdir(p)]' 2>/dev/null))
find_lib() {  # the first folder holding $1, else ldconfig's
  local d
  for d in "${candidates[@]}"; do [ -e "$d/$1" ] && { echo "$d"; return; }; done
  ldconfig -p | awk -v l="$1" '$1 == l {print $NF; exit}' | xargs -r dirname
}
cublas_dir=$(find_lib libcublasLt.so.13)
nccl_dir=$(find_lib libnccl.so.2)
echo "cuBLASLt from: ${cublas_dir:-not found}; NCCL from: ${nccl_dir:-not found}"
export LD_LIBRARY_PATH="$root/gpu-bundle/lib${cublas_dir:+:$cublas_dir}${nccl_dir:+:$nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "== 2. CUDA kernels against the references"
ldd "$root"/gpu-bundle/bin/* | grep "not found" && status=1
timeout 120 "$root/gpu-bundle/bin/test_kernels_cuda" --gtest_output="xml:$out/kernels_cuda.xml" \
  >"$out/kernels_cuda.txt" 2>&1
rc=$?
cat "$out/kernels_cuda.txt"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c GPU || true)
[ "${gpus:-0}" -gt 0 ] || gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$out/kernels_cuda.txt" || true)
if [ "$rc" -ne 0 ]; then
  echo "kernels: FAILED (exit $rc)"; status=1
elif [ "${gpus:-0}" -eq 0 ]; then
  echo "kernels: NOT RUN: no GPU here ($skipped tests skipped); the GPU checks have not run"
  [ "$status" -eq 0 ] && status=2
elif [ "$skipped" -gt 0 ]; then
  echo "kernels: FAILED: $skipped tests skipped on a machine with a GPU"; status=1
else
  echo "kernels: passed"
fi

echo "== 3. NCCL communicator, one rank on the GPU"
timeout 60 "$root/gpu-bundle/bin/test_comm_nccl" --gtest_output="xml:$out/comm_nccl.xml" \
  >"$out/comm_nccl.txt" 2>&1
rc=$?
cat "$out/comm_nccl.txt"
if [ "$rc" -ne 0 ]; then
  echo "nccl: FAILED (exit $rc)"; status=1
elif [ "${gpus:-0}" -eq 0 ]; then
  echo "nccl: NOT RUN: no GPU here"
elif grep -qE '^\[  SKIPPED \] NcclComm.OneRank.* \([0-9]+ ms\)$' "$out/comm_nccl.txt"; then
  echo "nccl: FAILED: skipped on a machine with a GPU"; status=1
else
  echo "nccl: passed"
fi

if [ "${gpus:-0}" -gt 0 ] && [ -x "$root/gpu-bundle/bin/eth" ]; then
  gpu_train_stages "$root/gpu-bundle/bin/eth" cuda "$out" || status=1
elif [ "${gpus:-0}" -gt 0 ]; then
  echo "training stages: NOT RUN: the bundle has no bin/eth (rebuild it: scripts/gpu-bundle.sh)"
  status=1
else
  echo "training stages (3, 4a, 4b): NOT RUN: no GPU here"
fi

echo "== 5. PyTorch baseline (gpt2-small, seq 1024, bf16)"
if [ "${gpus:-0}" -gt 0 ]; then
  timeout 300 python3 "$root/tools/torch_gpt2_gpu.py" --out "$out/torch_gpt2.json" || {
    echo "torch baseline: FAILED or timed out"; status=1; }
else
  echo "torch baseline: NOT RUN: no GPU here"
fi
echo "== gpu-check finished in $(( $(date +%s) - start )) s, status $status (output in $out)"
exit "$status"
