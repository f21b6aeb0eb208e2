#!/usr/bin/env bash
# Builds, on a build machine (CUDA toolkit, our Debian -dev packages, no GPU needed), what
# scripts/gpu-check.sh runs on the GPU machine, which has the CUDA 13 toolkit, CMake and PyTorch
# but none of our -dev packages and no network (docs/gpu.md):
#   gpu-bundle/bin/test_kernels_cuda   the CUDA kernels against the references (GoogleTest linked
#                                      statically, cudart static, cuBLASLt from the GPU machine's
#                                      toolkit)
#   gpu-bundle/bin/test_comm_nccl      the NCCL communicator on one GPU (NCCL from the GPU
#                                      machine's toolkit or PyTorch)
#   gpu-bundle/bin/eth                 the CLI: the training stages on --device cuda, the profile
#   gpu-bundle/bin/train_bench         the speed stage (--device cuda, beside PyTorch)
#   gpu-bundle/lib/                    the non-CUDA shared libraries they need beyond glibc
#                                      (libstdc++, libgcc_s, libgomp, OpenMPI's, oneDNN: 38 MiB
#                                      of its 44)
#   gpu-bundle/MANIFEST                commit, date, sizes
# and gpu-bundle.tar.xz, the same packed: what the device tool carries (it carries 64 MiB at most
# with the working tree, and the bundle unpacked does not fit beside it; gpu-check.sh unpacks
# the archive when gpu-bundle/ is missing). Our binaries are stripped. The CPU kernels they link
# are built for baseline x86-64 (-DETH_KERNELS_NATIVE=OFF): the GPU host's CPU is unknown here.
# Usage:
#   scripts/gpu-bundle.sh [BUILD_DIR]      (default build-gpu; the bundle goes to gpu-bundle/)
# then carry ["gpu-bundle.tar.xz"] to the GPU machine and run scripts/gpu-check.sh there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
bundle=$root/gpu-bundle
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DETH_WERROR=ON -DETH_CUDA=ON \
  -DETH_KERNELS_NATIVE=OFF -DETH_BUILD_BENCH=ON "${launcher[@]}" >/dev/null
cmake --build "$build" -j"${ETH_JOBS:-2}" --target test_kernels_cuda test_comm_nccl eth train_bench
rm -rf "$bundle" "$root/gpu-bundle.tar.xz"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/tests/kernels/test_kernels_cuda" "$build/tests/comm/test_comm_nccl" "$bundle/bin/"
cp "$build/src/cli/eth" "$build/bench/train_bench" "$bundle/bin/"
strip --strip-unneeded "$bundle"/bin/*
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
tar -C "$root" -cf - gpu-bundle | xz -T"${ETH_JOBS:-2}" -6 >"$root/gpu-bundle.tar.xz"
mib() { echo $(( ($1 + 1048575) / 1048576 )); }
unpacked=$(du -sb "$bundle" | cut -f1)
packed=$(stat -c %s "$root/gpu-bundle.tar.xz")
tree=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 stat -c %s 2>/dev/null) | awk '{s += $1} END {print s + 0}')
echo "gpu-bundle: $(mib "$unpacked") MiB unpacked (bin $(du -sm "$bundle/bin" | cut -f1) MiB, lib $(du -sm "$bundle/lib" | cut -f1) MiB), gpu-bundle.tar.xz $(mib "$packed") MiB; the working tree's tracked files $(mib "$tree") MiB"
# The device tool carries at most 64 MiB: the working tree and what carry names.
if [ $(( packed + tree )) -gt $(( 62 * 1048576 )) ]; then
  echo "gpu-bundle: the archive and the working tree come to $(mib $(( packed + tree ))) MiB, over the 62 MiB kept under the device tool's 64" >&2
  exit 1
fi
