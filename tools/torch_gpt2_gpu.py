#!/usr/bin/python3
"""PyTorch's side of the GPU speed check (issue 24; `train_bench --device cuda` runs it after
ETH's steps, in the same run, and prints both; scripts/gpu-check.sh stage 6): gpt2-small (the GPT
of tools/torch_gpt2_step.py: pre-norm blocks, tanh GELU, untied LM head, no dropout), sequence
1024, bf16 autocast with fp32 weights and the fused AdamW, in eager mode and under
torch.compile, at the largest micro-batch that fits (tried upwards from --batches until CUDA runs
out of memory; torch.compile downwards from eager's, as each size costs a compilation). Prints
and writes one JSON object: per mode the micro-batch, the median step time, tokens/s and model
FLOPs utilization against --peak-tflops (989, the H200/H100 dense bf16 figure of the device
presets). With --out the file is rewritten after every mode, so a timeout in torch.compile keeps
eager's figures. Exits 2 without a CUDA device (nothing measured).

Model FLOPs as ETH counts them (model/arithmetic.h): per token forward
L (24 C^2 + 4 T C) + 2 C V (matmuls 2 per multiply-add, attention's two products in full, not
halved for the causal mask), training 3x forward. Not a trainer: random tokens, no data.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt2_step import GPT, make_optimizer  # noqa: E402  (the same model as the CPU bench)


def model_flops_per_token(L, C, T, V):
    return 3 * (L * (24 * C * C + 4 * T * C) + 2 * C * V)


def run(mode, batch, a):
    torch.manual_seed(0)
    model = GPT(a.layers, a.hidden, a.heads, a.seq, a.vocab, 4 * a.hidden).cuda()
    opt, opt_kind = make_optimizer(model)
    step_model = torch.compile(model) if mode == "compile" else model
    idx = torch.randint(0, a.vocab, (batch, a.seq), device="cuda")
    tgt = torch.randint(0, a.vocab, (batch, a.seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    tokens_s = batch * a.seq / step_s
    mfu = tokens_s * model_flops_per_token(a.layers, a.hidden, a.seq, a.vocab) / (a.peak_tflops * 1e12)
    return {"micro_batch": batch, "step_s": step_s, "tokens_per_s": tokens_s, "mfu": mfu,
            "loss": float(loss), "optimizer": opt_kind,
            "max_memory_gib": torch.cuda.max_memory_allocated() / 2**30}


def try_run(mode, b, a):
    try:
        r = run(mode, b, a)
    except torch.cuda.OutOfMemoryError:
        print(f"[torch] {mode}: micro-batch {b} does not fit", file=sys.stderr, flush=True)
        r = None
    except Exception as e:  # noqa: BLE001  (torch.compile's errors come in many types)
        if "out of memory" in str(e).lower():
            print(f"[torch] {mode}: micro-batch {b} does not fit", file=sys.stderr, flush=True)
        else:
            print(f"[torch] {mode}: micro-batch {b} failed: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)
        r = None
    finally:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    if r is not None:
        print(f"[torch] {mode}: micro-batch {b}: {r['tokens_per_s']:.0f} tokens/s, "
              f"MFU {100 * r['mfu']:.1f}%", file=sys.stderr, flush=True)
    return r


def largest_that_fits(mode, a, start=None):
    """Upwards through --batches until one does not fit; with `start` (compile: every size costs
    a compilation), downwards from it until one fits."""
    sizes = [int(x) for x in a.batches.split(",")]
    if start is not None:
        for b in sorted([s for s in sizes if s <= start], reverse=True):
            r = try_run(mode, b, a)
            if r is not None:
                return r
        return None
    best = None
    for b in sizes:
        r = try_run(mode, b, a)
        if r is None:
            break
        best = r
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batches", default="8,16,32,64,96,128", help="micro-batches tried, ascending")
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--out", default="")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("[torch] no CUDA device: nothing measured", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = True
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
              "model": "gpt2-small", "seq": a.seq, "precision": "bf16 autocast, fp32 weights",
              "peak_tflops": a.peak_tflops, "modes": {}}
    for mode in a.modes.split(","):
        eager = result["modes"].get("eager")
        start = eager["micro_batch"] if mode == "compile" and eager else None
        result["modes"][mode] = largest_that_fits(mode, a, start)
        if a.out:  # after every mode: a timeout in the next one keeps this one's figures
            with open(a.out, "w") as f:
                f.write(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
