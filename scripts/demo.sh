#!/usr/bin/env bash
# The main job on its built-in default: install what is missing, build, then plan the paper's
# GPT-3 13B cluster (4 x 8 x 910B2 + 4 x 8 x 910B4, global batch 1024) with ETH, check the plan,
# simulate it, compare it with the layer-balanced and uniform baselines, and train the `tiny`
# model for a few steps on this CPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
echo "== building (first run: several minutes on 2 cores)"
"$root/scripts/build.sh" "$root/build" >/dev/null
eth="$root/build/src/cli/eth"
out="$root/build/demo"
mkdir -p "$out"
echo
echo "== Planning GPT-3 13B on 13b-910b2-910b4 (analytic profile), plan written to $out/plan-13b.json"
"$eth" plan --cluster 13b-910b2-910b4 --model gpt3-13b --gbs 1024 --out "$out/plan-13b.json"
echo
echo "== Checking the plan against every rule"
"$eth" validate --plan "$out/plan-13b.json" --cluster 13b-910b2-910b4 | head -n 1
echo
echo "== Predictor vs discrete-event simulator (timeline picture: $out/plan-13b.svg)"
"$eth" simulate --plan "$out/plan-13b.json" --cluster 13b-910b2-910b4 --analytic \
  --svg "$out/plan-13b.svg" | tail -n 8
echo
echo "== ETH vs the baselines on the same cluster and cost model"
"$eth" compare --cluster 13b-910b2-910b4 --model gpt3-13b --gbs 1024
echo
echo "== Training the tiny model on this CPU (single process) for 30 steps"
"$eth" data --synthetic 200000 --out "$out/synthetic.bin" >/dev/null
"$eth" train --model tiny --data "$out/synthetic.bin" --steps 30 --batch 8 --micro-batch-size 4 \
  --lr 3e-3 --warmup 3 --print-every 5
