#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with -fsanitize=fuzzer,address,undefined) and runs
# each for a fixed time from the checked-in corpus (fuzz/corpus/<target>; new inputs go to a
# scratch folder, the corpus is not modified). Any crash, sanitizer report, hang past 10 s on
# one input, or exception other than eth::InputError fails the run. docs/fuzzing.md.
# Usage: scripts/fuzz.sh [seconds per target, default 8] [build folder, default build-fuzz]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-8}
build=${2:-$root/build-fuzz}
targets=(plan cluster model device_types eth_profile metis_profile hostfile token_header
         checkpoint_header safetensors hf_config tokenizer)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
cmake -S "$root/fuzz" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"${ETH_JOBS:-2}" >/dev/null
echo "fuzz targets built in $(( $(date +%s) - start )) s"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  if ! "$build/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 "$work/$t" "$root/fuzz/corpus/$t" >"$work/$t.log" 2>&1
  then
    tail -n 60 "$work/$t.log"
    echo "fuzz_$t FAILED (reproduce: $build/fuzz_$t <the crash-* file named above>)" >&2
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$')
  echo "fuzz_$t: ${runs:-?} inputs in ${seconds} s, clean"
done
echo "fuzzing done in $(( $(date +%s) - start )) s"
