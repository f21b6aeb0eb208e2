#!/usr/bin/env bash
# The main job on its built-in default: install what is missing, build, then show ETH end to end
# on the paper's GPT-3 13B cluster (4 x 8 x 910B2 + 4 x 8 x 910B4).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build" >/dev/null
eth="$root/build/src/cli/eth"
out="$root/build/demo"
mkdir -p "$out"
echo "== The cluster: the paper's 13B scenario (eth clusters lists all presets)"
"$eth" clusters | grep -E "^(name|13b-910b2-910b4)"
echo
echo "== An analytic profile of GPT-3 13B on it, written to $out/profile-13b"
"$eth" profile --analytic --model gpt3-13b --cluster 13b-910b2-910b4 --out "$out/profile-13b"
echo
echo "== Validating an example plan (docs/examples/13b-hpp.json) against the cluster"
"$eth" validate --plan "$root/docs/examples/13b-hpp.json" --cluster 13b-910b2-910b4
