#!/usr/bin/env bash
# The main job on its built-in default: install what is missing, build, measure the `tiny`
# model on this CPU, plan it on `cpu-emulated` (2 fast + 2 slow CPU ranks, the slow ones 3x
# slower: EMULATED on this one machine) with ETH and with the layer-balanced baseline, train it
# under both plans on 4 MPI ranks, and print the loss curve and the measured speedup. Then the
# planner on the paper's GPT-3 13B cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
echo "== building (first run: several minutes on 2 cores)"
"$root/scripts/build.sh" "$root/build" >/dev/null
eth="$root/build/src/cli/eth"
out="$root/build/demo"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=${ETH_DEMO_STEPS:-40}
gbs=64

echo
echo "== Measuring the tiny model's units on this CPU (one core, the cpu device type)"
"$eth" profile --measure --model tiny --micro-batch-sizes 1,2,4,8,16 --out "$out/profile-tiny" |
  tail -n +1
echo
echo "== Planning tiny on cpu-emulated (EMULATED: 2 x cpu-fast + 2 x cpu-slow), global batch $gbs"
"$eth" plan --cluster cpu-emulated --model tiny --gbs $gbs --profile "$out/profile-tiny" \
  --out "$out/eth.json"
echo
"$eth" plan --cluster cpu-emulated --model tiny --gbs $gbs --profile "$out/profile-tiny" \
  --method layer --out "$out/layer.json" | head -n 8
"$eth" data --synthetic 400000 --out "$out/synthetic.bin" >/dev/null
rm -f "$out/eth.jsonl" "$out/layer.jsonl"
train=(--data "$out/synthetic.bin" --steps "$steps" --lr 3e-3 --warmup 3
       --profile "$out/profile-tiny")
echo
echo "== Training tiny under the ETH plan: eth launch starts 4 MPI ranks"
"$eth" launch --plan "$out/eth.json" -- "${train[@]}" --print-every 5 --log "$out/eth.jsonl" |
  tee "$out/eth.txt"
echo
echo "== The same training under the layer-balanced plan"
"$eth" launch --plan "$out/layer.json" -- "${train[@]}" --print-every 10 \
  --log "$out/layer.jsonl" | tee "$out/layer.txt"
echo
echo "== Loss curve (the same global batches under both plans: equal up to float rounding)"
paste -d' ' <(grep -o '"loss":[^,]*' "$out/eth.jsonl" | cut -d: -f2) \
            <(grep -o '"loss":[^,]*' "$out/layer.jsonl" | cut -d: -f2) |
  awk 'BEGIN { printf "%6s %10s %10s\n", "step", "eth", "layer" }
       (NR - 1) % 5 == 0 || NR == '"$steps"' { printf "%6d %10.4f %10.4f\n", NR - 1, $1, $2 }'
measured() { grep -o 'measured iteration: [0-9.]*' "$1" | awk '{ print $3 }'; }
predicted() { grep -o 'predicted: [0-9.]*' "$1" | awk '{ print $2 }'; }
awk -v e="$(measured "$out/eth.txt")" -v l="$(measured "$out/layer.txt")" \
    -v pe="$(predicted "$out/eth.txt")" -v pl="$(predicted "$out/layer.txt")" 'BEGIN {
  printf "\nETH plan vs layer-balanced plan on the EMULATED cluster: %.1f ms vs %.1f ms per " \
         "iteration measured, speedup %.2fx (predicted %.2fx)\n", e, l, l / e, pl / pe }'
echo
echo "== The planner on the paper's GPT-3 13B cluster (4 x 8 x 910B2 + 4 x 8 x 910B4)"
"$eth" compare --cluster 13b-910b2-910b4 --model gpt3-13b --gbs 1024
