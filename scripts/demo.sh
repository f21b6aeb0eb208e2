#!/usr/bin/env bash
# The main job on its built-in default: install what is missing, build the `eth` tool (only it:
# no tests, no benchmarks), measure the `tiny` model on this CPU, plan it on `cpu-emulated`
# (2 fast + 2 slow CPU ranks, the slow ones 3x slower: EMULATED on this one machine) with ETH,
# the layer-balanced baseline and the uniform one, train it under each plan on 4 MPI ranks, and
# print the loss curves, each plan's predicted and measured iteration time with their ratio,
# and the speedups. The eth run is traced and drawn beside its simulation. Then the planner on
# the paper's GPT-3 13B cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
build="$root/build"
echo "== building the eth tool (first run: a few minutes on 2 cores)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"${ETH_JOBS:-2}" --target eth >/dev/null
eth="$build/src/cli/eth"
out="$build/demo"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=${ETH_DEMO_STEPS:-40}
gbs=64
methods=(eth layer uniform)

echo
echo "== Measuring the tiny model's units on this CPU (one core, the cpu device type)"
"$eth" profile --measure --model tiny --micro-batch-sizes 1,2,4,8,16 --out "$out/profile-tiny"
echo
echo "== Planning tiny on cpu-emulated (EMULATED: 2 x cpu-fast + 2 x cpu-slow), global batch $gbs"
for m in "${methods[@]}"; do
  "$eth" plan --cluster cpu-emulated --model tiny --gbs $gbs --profile "$out/profile-tiny" \
    --method "$m" --out "$out/$m.json" |
    { [[ $m == eth ]] && cat || sed -n '1,/^predicted iteration/p'; }
  echo
done
"$eth" data --synthetic 400000 --out "$out/synthetic.bin" >/dev/null
# One thread per rank, as the profile was measured (docs/runtime.md).
train=(--data "$out/synthetic.bin" --steps "$steps" --lr 3e-3 --warmup 3
       --profile "$out/profile-tiny" --threads 1)
for m in "${methods[@]}"; do
  rm -f "$out/$m.jsonl"
  echo "== Training tiny under the $m plan: eth launch starts 4 MPI ranks"
  extra=()
  [[ $m == eth ]] && extra=(--trace "$out/eth-trace.json")
  "$eth" launch --plan "$out/$m.json" -- "${train[@]}" --print-every 10 --log "$out/$m.jsonl" \
    "${extra[@]}" | tee "$out/$m.txt"
  echo
done
echo "== The eth run's measured timeline beside its simulation"
"$eth" simulate --plan "$out/eth.json" --profile "$out/profile-tiny" \
  --measured "$out/eth-trace.json" --svg "$out/eth-measured.svg" | sed -n '/simulated vs measured/,$p'
echo "picture: $out/eth-measured.svg"
echo
echo "== Loss curves (the same global batches under every plan: equal up to float rounding)"
paste -d' ' <(grep -o '"loss":[^,]*' "$out/eth.jsonl" | cut -d: -f2) \
            <(grep -o '"loss":[^,]*' "$out/layer.jsonl" | cut -d: -f2) \
            <(grep -o '"loss":[^,]*' "$out/uniform.jsonl" | cut -d: -f2) |
  awk 'BEGIN { printf "%6s %10s %10s %10s\n", "step", "eth", "layer", "uniform" }
       (NR - 1) % 5 == 0 || NR == '"$steps"' { printf "%6d %10.4f %10.4f %10.4f\n", NR - 1, $1, $2, $3 }'
measured() { grep -o 'measured iteration: [0-9.]*' "$1" | awk '{ print $3 }'; }
predicted() { grep -o 'predicted: [0-9.]*' "$1" | awk '{ print $2 }'; }
echo
echo "== Predicted vs measured iteration time on the EMULATED cluster (mean of steps 1..$((steps - 1)))"
printf "%-8s %13s %12s %18s\n" plan "predicted ms" "measured ms" "predicted/measured"
for m in "${methods[@]}"; do
  awk -v m="$m" -v p="$(predicted "$out/$m.txt")" -v e="$(measured "$out/$m.txt")" \
    'BEGIN { printf "%-8s %13.1f %12.1f %18.2f\n", m, p, e, p / e }'
done
awk -v e="$(measured "$out/eth.txt")" -v l="$(measured "$out/layer.txt")" \
    -v u="$(measured "$out/uniform.txt")" -v pe="$(predicted "$out/eth.txt")" \
    -v pl="$(predicted "$out/layer.txt")" -v pu="$(predicted "$out/uniform.txt")" 'BEGIN {
  printf "ETH speedup over layer: measured %.2fx, predicted %.2fx; over uniform: measured %.2fx, " \
         "predicted %.2fx\n", l / e, pl / pe, u / e, pu / pe }'
echo "(load average now: $(cut -d' ' -f1-3 /proc/loadavg); the machine is shared, figures move with it)"
echo
echo "== The planner on the paper's GPT-3 13B cluster (4 x 8 x 910B2 + 4 x 8 x 910B4)"
"$eth" compare --cluster 13b-910b2-910b4 --model gpt3-13b --gbs 1024
