# The single-process GPU training stages of scripts/gpu-check.sh, sourced by it (not run alone):
# gpu_train_stages ETH DEVICE OUT runs, through the eth binary ETH on DEVICE (emulated or cuda):
#   3.  one training step of tiny (T 32, two micro-batches) against the CPU bf16 trainer: loss and
#       gradient norm within the bf16 tolerance 2 u L (u = 2^-8, L layers: tests/train/
#       emulated_train_test.cpp says why);
#   4a. recompute (every operator class, and full units, dropout 0.1) changes no loss and no
#       gradient norm, bitwise;
#   4b. a checkpoint moves CPU (steps 0-3) -> DEVICE (4-7) -> CPU (8-11): each segment's losses
#       are those of a run on that segment's device from the same checkpoint, bitwise (segment 2
#       against an uninterrupted device run from step 4, whose steps 8-11 a device run resumed
#       from segment 2's checkpoint repeats), and the whole is within the bf16 tolerance of an
#       all-CPU run.
#   4c. a two-pipeline heterogeneous plan of tiny (local batches 6 and 2, a partial micro-batch,
#       tp 2 in one stage) with its ranks as threads sharing DEVICE (eth train --plan --backend
#       threads --device DEVICE: messages device to device) against single-process DEVICE
#       training for 20 steps: every loss within 2e-3 relative (the plan reorders fp32 sums only:
#       tests/runtime/emulated_dist_test.cpp says why);
#   4d. recompute in the plan's stages (full units, attention, all operator classes) changes no
#       loss and no gradient norm, bitwise;
#   4e. a checkpoint moves under the plan: cpu (0-3) -> DEVICE (4-7) -> cpu (8-11): segment 2 is
#       bitwise an uninterrupted DEVICE plan run from the same checkpoint, the whole within the
#       bf16 tolerance 2 u L of an all-CPU plan run.
# Stages 4a-4e run eth on one OpenMP thread (every rank of a plan is): the kernels give the same
# bits on any count, and two spinning threads each on a loaded 2-core CI machine took minutes.
# Each stage prints its verdict the moment it ends and has its own timeout; the function's status
# is 0 when every stage passed, 1 otherwise. Needs bash, awk and timeout only.

# The values of one JSON field in a JSON-lines log, one per line (nlohmann prints doubles so that
# they read back exactly, so equal strings are equal numbers).
gpu_field() { sed -E 's/.*"'"$2"'":([^,}]*).*/\1/' "$1"; }

# Whether every pair of values of two files is within rel * |b| (rel tolerance), printing each
# with the names $5 and $6 (default: device, cpu).
gpu_within() {
  paste "$1" "$2" | awk -v rel="$3" -v what="$4" -v ga="${5:-device}" -v gb="${6:-cpu}" '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2);
      printf "  %s %d: %s %.9g %s %.9g (rel %.2e, tolerance %.2e)\n", what, NR - 1, ga, $1, gb, $2, r, rel;
      if (!(r <= rel)) bad = 1 }
    END { exit bad || NR == 0 }'
}

gpu_train_stages() {
  local eth=$1 dev=$2 out=$3/train status=0 t0
  rm -rf "$out"; mkdir -p "$out"
  "$eth" data --synthetic 20000 --vocab 256 --seed 3 --out "$out/data.bin" >/dev/null || {
    echo "training stages: FAILED: eth data"; return 1; }
  # tiny: 4 layers, so the tolerance is 2 * 2^-8 * 4.
  local tol=0.03125
  local common=(--model tiny --data "$out/data.bin" --batch 4 --micro-batch-size 2 --seq-len 32
                --lr 3e-3 --lr-min 3e-4 --warmup 2 --seed 5 --print-every 0)

  echo "== 3. one training step of tiny on $dev against the CPU bf16 trainer"
  t0=$(date +%s)
  if timeout 120 "$eth" train "${common[@]}" --steps 1 --device cpu --precision bf16 \
       --log "$out/one_cpu.jsonl" >"$out/one_cpu.txt" 2>&1 &&
     timeout 120 "$eth" train "${common[@]}" --steps 1 --device "$dev" \
       --log "$out/one_dev.jsonl" >"$out/one_dev.txt" 2>&1; then
    gpu_field "$out/one_cpu.jsonl" loss >"$out/a"; gpu_field "$out/one_dev.jsonl" loss >"$out/b"
    gpu_field "$out/one_cpu.jsonl" grad_norm >"$out/c"; gpu_field "$out/one_dev.jsonl" grad_norm >"$out/d"
    if gpu_within "$out/b" "$out/a" "$tol" loss && gpu_within "$out/d" "$out/c" "$tol" grad_norm; then
      echo "one step on $dev: passed ($(( $(date +%s) - t0 )) s)"
    else
      echo "one step on $dev: FAILED: outside the bf16 tolerance"; status=1
    fi
  else
    echo "one step on $dev: FAILED or timed out:"; tail -3 "$out/one_cpu.txt" "$out/one_dev.txt"; status=1
  fi

  echo "== 4a. recompute changes no loss on $dev"
  t0=$(date +%s)
  local rc_ok=1 rc
  for rc in none qkv attn_score attn_softmax attn_dropout mlp_act unit \
            qkv,attn_score,attn_softmax,attn_dropout,mlp_act; do
    local flag=(); [ "$rc" = none ] || flag=(--recompute "$rc")
    if ! OMP_NUM_THREADS=1 timeout 120 "$eth" train "${common[@]}" --steps 2 --dropout 0.1 --device "$dev" "${flag[@]}" \
         --log "$out/rc_$rc.jsonl" >"$out/rc_$rc.txt" 2>&1; then
      echo "  recompute $rc: FAILED or timed out"; tail -3 "$out/rc_$rc.txt"; rc_ok=0; continue
    fi
    if [ "$rc" != none ]; then
      if [ "$(gpu_field "$out/rc_$rc.jsonl" loss; gpu_field "$out/rc_$rc.jsonl" grad_norm)" = \
           "$(gpu_field "$out/rc_none.jsonl" loss; gpu_field "$out/rc_none.jsonl" grad_norm)" ]; then
        echo "  recompute $rc: the same losses and gradient norms, bitwise"
      else
        echo "  recompute $rc: DIFFERS"; rc_ok=0
      fi
    fi
  done
  if [ "$rc_ok" -eq 1 ]; then echo "recompute on $dev: passed ($(( $(date +%s) - t0 )) s)"
  else echo "recompute on $dev: FAILED"; status=1; fi

  echo "== 4b. a checkpoint moves cpu (0-3) -> $dev (4-7) -> cpu (8-11)"
  t0=$(date +%s)
  local run12=("${common[@]}" --steps 12)
  local ck_ok=1
  # run NAME DEVICE [flags]: one eth train into $out/ck_NAME.jsonl
  ck_run() {
    local name=$1 d=$2; shift 2
    local prec=(); [ "$d" = cpu ] && prec=(--precision bf16)
    OMP_NUM_THREADS=1 timeout 120 "$eth" train "${run12[@]}" --device "$d" "${prec[@]}" "$@" \
      --log "$out/ck_$name.jsonl" >"$out/ck_$name.txt" 2>&1 || {
      echo "  $name: FAILED or timed out"; tail -3 "$out/ck_$name.txt"; ck_ok=0; }
  }
  # The checkpoint eth train wrote into folder $1 (step_<8 digits>.safetensors).
  ck_file() { ls "$1"/step_*.safetensors 2>/dev/null | tail -1; }
  ck_run all cpu                                                    # uninterrupted, on the CPU
  ck_run seg1 cpu --stop-at 4 --checkpoint-dir "$out/ck1"
  ck_run seg2 "$dev" --resume "$(ck_file "$out/ck1")" --stop-at 8 --checkpoint-dir "$out/ck2"
  ck_run seg3 cpu --resume "$(ck_file "$out/ck2")"
  ck_run dev_whole "$dev" --resume "$(ck_file "$out/ck1")"           # 4-11 uninterrupted
  ck_run dev_resumed "$dev" --resume "$(ck_file "$out/ck2")"         # 8-11 on the device
  ck_run cpu_again cpu --resume "$(ck_file "$out/ck2")"
  if [ "$ck_ok" -eq 1 ]; then
    # Bitwise: segment 1 is the all-CPU run's first four steps; segment 2 the first four of an
    # uninterrupted device run from the same checkpoint, whose last four are those of a device
    # run resumed from segment 2's checkpoint (the device's own round trip is exact); segment 3
    # a second CPU run from segment 2's checkpoint.
    [ "$(gpu_field "$out/ck_seg1.jsonl" loss)" = "$(gpu_field "$out/ck_all.jsonl" loss | head -4)" ] ||
      { echo "  segment 1 (cpu) differs from the all-CPU run"; ck_ok=0; }
    [ "$(gpu_field "$out/ck_seg2.jsonl" loss)" = "$(gpu_field "$out/ck_dev_whole.jsonl" loss | head -4)" ] ||
      { echo "  segment 2 ($dev) differs from an uninterrupted $dev run from step 4"; ck_ok=0; }
    [ "$(gpu_field "$out/ck_dev_resumed.jsonl" loss)" = "$(gpu_field "$out/ck_dev_whole.jsonl" loss | tail -4)" ] ||
      { echo "  a $dev run resumed from step 8 differs from the uninterrupted $dev run"; ck_ok=0; }
    [ "$(gpu_field "$out/ck_seg3.jsonl" loss)" = "$(gpu_field "$out/ck_cpu_again.jsonl" loss)" ] ||
      { echo "  segment 3 (cpu) differs from a second cpu run from step 8"; ck_ok=0; }
    [ "$ck_ok" -eq 1 ] && echo "  each segment: bitwise the run on its device from the same checkpoint"
    cat "$out/ck_seg1.jsonl" "$out/ck_seg2.jsonl" "$out/ck_seg3.jsonl" >"$out/ck_moved.jsonl"
    gpu_field "$out/ck_moved.jsonl" loss >"$out/a"; gpu_field "$out/ck_all.jsonl" loss >"$out/b"
    [ "$(wc -l <"$out/a")" -eq 12 ] || { echo "  $(wc -l <"$out/a") steps logged, not 12"; ck_ok=0; }
    gpu_within "$out/a" "$out/b" "$tol" loss moved all-cpu || ck_ok=0
  fi
  if [ "$ck_ok" -eq 1 ]; then echo "checkpoint across devices: passed ($(( $(date +%s) - t0 )) s)"
  else echo "checkpoint across devices: FAILED"; status=1; fi
  gpu_plan_stages "$eth" "$dev" "$out" || status=1
  return "$status"
}

# A plan file of tiny on 5 devices; $2 is pipeline A's second stage's recompute list and $3
# pipeline B's first stage's (JSON arrays).
gpu_plan_file() {
  cat >"$1" <<EOF_PLAN
{"format": "eth-plan", "version": 1, "model": "tiny", "gbs": 8, "seq_len": 16, "pipelines": [
  {"micro_batch_size": 4, "local_batch": 6, "stages": [
    {"device_type": "cpu", "devices": [0, 1], "tp": 2, "units": [0, 2]},
    {"device_type": "cpu", "devices": [2], "units": [3, 5], "recompute": $2}]},
  {"micro_batch_size": 1, "local_batch": 2, "stages": [
    {"device_type": "cpu", "devices": [3], "units": [0, 3], "recompute": $3},
    {"device_type": "cpu", "devices": [4], "units": [4, 5]}]}]}
EOF_PLAN
}

# Stages 4c-4e (above): gpu_plan_stages ETH DEVICE OUT (OUT/train already holds data.bin).
gpu_plan_stages() {
  local eth=$1 dev=$2 out=$3 status=0 t0 tol=0.03125
  gpu_plan_file "$out/plan.json" '[]' '[]'
  gpu_plan_file "$out/plan_rc.json" '["unit"]' \
    '["qkv", "attn_score", "attn_softmax", "attn_dropout", "mlp_act"]'
  echo '{"nodes": [{"device_type": "cpu", "devices": 5}]}' >"$out/cluster.json"
  local common=(--data "$out/data.bin" --lr 3e-3 --lr-min 3e-4 --warmup 2 --seed 5
                --dropout 0.1 --print-every 0)
  # prun NAME DEVICE PLAN [flags]: eth train --plan into $out/plan_NAME.jsonl
  prun() {
    local name=$1 d=$2 p=$3; shift 3
    local prec=(); [ "$d" = cpu ] && prec=(--precision bf16)
    rm -f "$out/plan_$name.jsonl"  # --log appends
    timeout 180 "$eth" train --plan "$p" --cluster "$out/cluster.json" --backend threads \
      "${common[@]}" --device "$d" "${prec[@]}" "$@" --log "$out/plan_$name.jsonl" \
      >"$out/plan_$name.txt" 2>&1 || {
      echo "  $name: FAILED or timed out"; tail -3 "$out/plan_$name.txt"; return 1; }
  }

  echo "== 4c. a two-pipeline plan on threads sharing $dev against one $dev process, 20 steps"
  t0=$(date +%s)
  # The single process on one OpenMP thread, as each rank of the plan is (the kernels give the
  # same bits on any count; two spinning threads on a loaded CI machine take minutes).
  rm -f "$out/plan_single.jsonl"
  if prun p20 "$dev" "$out/plan.json" --steps 20 &&
     OMP_NUM_THREADS=1 timeout 180 "$eth" train --model tiny --batch 8 --seq-len 16 "${common[@]}" --steps 20 \
       --device "$dev" --log "$out/plan_single.jsonl" >"$out/plan_single.txt" 2>&1; then
    gpu_field "$out/plan_p20.jsonl" loss >"$out/a"; gpu_field "$out/plan_single.jsonl" loss >"$out/b"
    if [ "$(wc -l <"$out/a")" -eq 20 ] && gpu_within "$out/a" "$out/b" 2e-3 loss plan one; then
      echo "plan on threads sharing $dev: passed ($(( $(date +%s) - t0 )) s)"
    else
      echo "plan on threads sharing $dev: FAILED: outside 2e-3 of one process"; status=1
    fi
  else
    echo "plan on threads sharing $dev: FAILED or timed out"; tail -3 "$out/plan_single.txt"; status=1
  fi

  echo "== 4d. recompute in the plan's stages changes no loss on $dev"
  t0=$(date +%s)
  if prun rc_none "$dev" "$out/plan.json" --steps 3 && prun rc_all "$dev" "$out/plan_rc.json" --steps 3 &&
     [ "$(gpu_field "$out/plan_rc_all.jsonl" loss; gpu_field "$out/plan_rc_all.jsonl" grad_norm)" = \
       "$(gpu_field "$out/plan_rc_none.jsonl" loss; gpu_field "$out/plan_rc_none.jsonl" grad_norm)" ]; then
    echo "recompute in the plan on $dev: passed, bitwise ($(( $(date +%s) - t0 )) s)"
  else
    echo "recompute in the plan on $dev: FAILED"; status=1
  fi

  echo "== 4e. a checkpoint moves under the plan: cpu (0-3) -> $dev (4-7) -> cpu (8-11)"
  t0=$(date +%s)
  local ck_ok=1 p=$out/plan.json
  ck_file() { ls "$1"/step_*.safetensors 2>/dev/null | tail -1; }
  prun ck_all cpu "$p" --steps 12 || ck_ok=0
  prun ck_seg1 cpu "$p" --steps 12 --stop-at 4 --checkpoint-dir "$out/pck1" || ck_ok=0
  prun ck_seg2 "$dev" "$p" --steps 12 --resume "$(ck_file "$out/pck1")" --stop-at 8 \
    --checkpoint-dir "$out/pck2" || ck_ok=0
  prun ck_seg3 cpu "$p" --steps 12 --resume "$(ck_file "$out/pck2")" || ck_ok=0
  prun ck_dev "$dev" "$p" --steps 12 --resume "$(ck_file "$out/pck1")" || ck_ok=0  # 4-11
  if [ "$ck_ok" -eq 1 ]; then
    [ "$(gpu_field "$out/plan_ck_seg2.jsonl" loss)" = "$(gpu_field "$out/plan_ck_dev.jsonl" loss | head -4)" ] ||
      { echo "  segment 2 ($dev) differs from an uninterrupted $dev plan run from step 4"; ck_ok=0; }
    cat "$out/plan_ck_seg1.jsonl" "$out/plan_ck_seg2.jsonl" "$out/plan_ck_seg3.jsonl" \
      >"$out/plan_ck_moved.jsonl"
    gpu_field "$out/plan_ck_moved.jsonl" loss >"$out/a"; gpu_field "$out/plan_ck_all.jsonl" loss >"$out/b"
    [ "$(wc -l <"$out/a")" -eq 12 ] || { echo "  $(wc -l <"$out/a") steps logged, not 12"; ck_ok=0; }
    gpu_within "$out/a" "$out/b" "$tol" loss moved all-cpu || ck_ok=0
  fi
  if [ "$ck_ok" -eq 1 ]; then echo "checkpoint across devices under the plan: passed ($(( $(date +%s) - t0 )) s)"
  else echo "checkpoint across devices under the plan: FAILED"; status=1; fi
  return "$status"
}
