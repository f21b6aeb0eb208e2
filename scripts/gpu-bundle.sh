#!/usr/bin/env bash
# Builds, on a build machine (CUDA toolkit, our Debian -dev packages, no GPU needed), what
# scripts/gpu-check.sh runs on the GPU machine, which has the CUDA 13 toolkit, CMake and PyTorch
# but none of our -dev packages and no network (docs/gpu.md):
#   gpu-bundle/bin/test_kernels_cuda   the CUDA kernels against the references (GoogleTest linked
#                                      statically, cudart static, cuBLASLt from the GPU machine's
#                                      toolkit)
#   gpu-bundle/bin/test_comm_nccl      the NCCL communicator on one GPU (NCCL from the GPU
#                                      machine's toolkit or PyTorch)
#   gpu-bundle/bin/eth                 the CLI, for the training stages on --device cuda
#   gpu-bundle/lib/                    the non-CUDA shared libraries it needs beyond glibc
#                                      (libstdc++, libgcc_s, libgomp, oneDNN for the CPU
#                                      side of the block test: about 43 MiB in all)
#   gpu-bundle/MANIFEST                commit, date, sizes
# The CPU kernels it links (the references' dropout masks) are built for baseline x86-64
# (-DETH_KERNELS_NATIVE=OFF): the GPU host's CPU is unknown here. Usage:
#   scripts/gpu-bundle.sh [BUILD_DIR]      (default build-gpu; the bundle goes to gpu-bundle/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
bundle=$root/gpu-bundle
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DETH_WERROR=ON -DETH_CUDA=ON \
  -DETH_KERNELS_NATIVE=OFF -DETH_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j"${ETH_JOBS:-2}" --target test_kernels_cuda test_comm_nccl eth
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/tests/kernels/test_kernels_cuda" "$build/tests/comm/test_comm_nccl" "$bundle/bin/"
cp "$build/src/cli/eth" "$bundle/bin/"  # the training stages of gpu-check.sh (--device cuda)
# The shared libraries beyond glibc and the CUDA toolkit's (those come from the GPU machine).
ldd "$bundle"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libcublas*|libcudart*|libnccl*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
{
  echo "commit $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet || echo ' (dirty)')"
  echo "built $(date -u +%FT%TZ) on $(hostname) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo "nvcc $(nvcc --version | tail -1)"
  echo "glibc $(ldd --version | head -1 | awk '{print $NF}') (the GPU machine needs this or newer)"
  (cd "$bundle" && find bin lib -type f -printf '%s %p\n')
} >"$bundle/MANIFEST"
size=$(du -sm "$bundle" | cut -f1)
echo "gpu-bundle: ${size} MiB in $bundle"
# The device tool carries at most 64 MiB with the working tree.
[ "$size" -le 60 ] || echo "gpu-bundle: WARNING: ${size} MiB is near or over the 64 MiB the device tool carries"

if [ "$size" -gt 60 ]; then
  echo "gpu-bundle: over 60 MiB; the device machine carries 64 MiB at most" >&2
  exit 1
fi
