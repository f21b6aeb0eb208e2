#!/usr/bin/env bash
# The whole test suite: install what is missing, build with warnings as errors, run every test,
# then rebuild under AddressSanitizer + UndefinedBehaviorSanitizer and run the suite again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s)
echo "== build (Release, -Werror)"
"$root/scripts/build.sh" "$root/build-test" -DETH_WERROR=ON -DETH_BUILD_BENCH=ON
echo "== tests"
ctest --test-dir "$root/build-test" --output-on-failure -j2 --timeout 600
echo "== build (ASan + UBSan)"
"$root/scripts/build.sh" "$root/build-asan" -DETH_WERROR=ON -DETH_SANITIZE=address \
  -DCMAKE_BUILD_TYPE=Debug -DETH_BUILD_BENCH=OFF
echo "== tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j2 --timeout 900 -LE slow
echo "== all tests passed in $(( $(date +%s) - start )) s"
