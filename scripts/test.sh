#!/usr/bin/env bash
# The whole test suite: install what is missing, build with warnings as errors, run every test,
# then rebuild under AddressSanitizer + UndefinedBehaviorSanitizer and run the suite again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s)
# The size rules first (a second): no source file over 800 lines, no function over 150.
echo "== sizes (src, bench)"
python3 "$root/tools/check_sizes.py" "$root/src" "$root/bench"
echo "== build (Release, -Werror)"
"$root/scripts/build.sh" "$root/build-test" -DETH_WERROR=ON -DETH_BUILD_BENCH=ON
echo "== tests"
ctest --test-dir "$root/build-test" --output-on-failure -j2 --timeout 600
# The single-process GPU training stages of gpu-check.sh on the host-emulated GPU, through the
# built eth: the script itself has run before it meets a GPU (docs/gpu.md).
echo "== gpu-check --emulated"
OUT="$root/build-test" bash "$root/scripts/gpu-check.sh" --emulated "$root/build-test"
# The sanitizer pass covers the unit-labelled suites (specs, profiles, cost, schedule, simulator,
# planner, data, comm, CLI): the input-handling code a bad file reaches. The numerics suites
# (kernels, trainer) pass under -DETH_SANITIZE=address too but would double CI's time here.
echo "== build (ASan + UBSan)"
# Without CUDA (nvcc instruments nothing, and it keeps this pass short): it also checks that a
# build without the toolkit works and that --device cuda says so (tests/cli/device_cli_test.cpp).
# -g1: line tables for the sanitizers' stack traces, without -g's full debug information (about
# 15% of this pass's compile time on 2 cores, and a third of its object bytes).
# Not -DETH_UNITY_SRC=ON (cmake/unity.cmake): it cuts this pass's compile CPU by a fifth, but
# with make's target-by-target order its few large TUs leave one core idle, and its wall time
# grew in a fresh clone (docs/testing.md).
cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DETH_WERROR=ON -DETH_SANITIZE=address -DETH_BUILD_BENCH=OFF -DETH_CUDA=OFF >/dev/null
# Every test target labelled unit or integration (no LABEL means unit), found from tests/*/CMakeLists.txt.
targets=$(grep -h "eth_test(" "$root"/tests/*/CMakeLists.txt | grep -v "LABEL numerics\|LABEL mpi\|LABEL gpu" |
  sed -E 's/.*eth_test\(([a-z_]+).*/test_\1/' | tr '\n' ' ')
# Only the targets this configuration defines: some exist only where a backend is off (say
# test_comm_no_mpi, built when MPI is not).
defined=" $(cmake --build "$root/build-asan" --target help | sed -n 's/^\.\.\. \([a-z_0-9]*\).*/\1/p' | tr '\n' ' ')"
targets=$(for t in $targets; do if [[ $defined == *" $t "* ]]; then echo "$t"; fi; done | tr "\n" " ")
cmake --build "$root/build-asan" -j"${ETH_JOBS:-2}" --target eth $targets
echo "== unit and CLI tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j2 --timeout 900 -L "unit|integration"
# Every loader under libFuzzer (clang, ASan + UBSan) for a few seconds each from the checked-in
# corpus: any crash, hang or exception other than InputError fails the suite (docs/fuzzing.md).
echo "== fuzz targets (libFuzzer, 6 s each)"
"$root/scripts/fuzz.sh" 6 "$root/build-fuzz"
echo "== all tests passed in $(( $(date +%s) - start )) s"
