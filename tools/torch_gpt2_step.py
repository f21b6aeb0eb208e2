#!/usr/bin/python3
"""PyTorch CPU baseline for bench/train_bench: one training step (forward, backward, AdamW) of
the same GPT as ETH's (pre-norm blocks, tanh GELU, untied LM head, no dropout), timed the same
way, in fp32 or in bf16 mixed precision (torch.autocast on the CPU, fp32 weights, as PyTorch's
AMP documentation prescribes for CPU training). Prints one JSON object. Not a trainer: random
tokens, no data, no checkpoints.

Configured as PyTorch's CPU performance tuning guide recommends for training: intra-op threads
set to the cores used (torch.set_num_threads, OMP_NUM_THREADS), a huge-page-friendly allocator
(the caller sets GLIBC_TUNABLES=glibc.malloc.hugetlb=1 or preloads jemalloc/tcmalloc), fused
scaled-dot-product attention and the fused AdamW kernel where this torch has them (falling back
to the written-out attention and the foreach AdamW of older versions, e.g. Debian's 1.13).

With --serve it runs the warm-up steps of every precision it serves, prints "ready", then one
timed step per "step fp32" / "step bf16" line on stdin (answering {"step_s": ...} on one line)
until "quit" or end of input, then the summary: train_bench alternates these steps with its own
so that every configuration meets the same machine load.
"""
import argparse
import contextlib
import json
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, C, NH, FF):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, FF)
        self.fcproj = nn.Linear(FF, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.13: written out
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, T, V, FF):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, NH, FF) for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)))

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def make_optimizer(model):
    kw = dict(lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    try:
        return torch.optim.AdamW(model.parameters(), fused=True, **kw), "fused"
    except (TypeError, RuntimeError):
        return torch.optim.AdamW(model.parameters(), **kw), "default"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ffn", type=int, default=3072)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--max-seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--precisions", default="fp32",
                   help="comma-separated: fp32 and/or bf16 (autocast); warmed up in turn")
    p.add_argument("--serve", action="store_true",
                   help="after warm-up, one step per 'step PRECISION' line on stdin")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.layers, a.hidden, a.heads, a.max_seq, a.vocab, a.ffn)
    model.train()
    opt, adamw = make_optimizer(model)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq))
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq))
    precisions = a.precisions.split(",")

    def step(precision):
        ctx = (torch.autocast(device_type="cpu", dtype=torch.bfloat16)
               if precision == "bf16" else contextlib.nullcontext())
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with ctx:
            loss = model(idx, tgt)
        loss.backward()
        opt.step()
        return time.perf_counter() - t0, loss

    times = {q: [] for q in precisions}
    loss = torch.zeros(())
    for q in precisions:
        for _ in range(a.warmup):
            step(q)
    if a.serve:
        print("ready", flush=True)
        for line in sys.stdin:
            words = line.split()
            if len(words) != 2 or words[0] != "step" or words[1] not in times:
                break
            dt, loss = step(words[1])
            times[words[1]].append(dt)
            print(json.dumps({"step_s": dt}), flush=True)
    else:
        for q in precisions:
            for _ in range(a.steps):
                dt, loss = step(q)
                times[q].append(dt)
    json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(),
               "attention": "scaled_dot_product_attention" if HAS_SDPA else "explicit",
               "adamw": adamw, "step_s_all": times, "loss": float(loss),
               "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
              sys.stdout)
    print(flush=True)


if __name__ == "__main__":
    main()
