#!/usr/bin/python3
"""PyTorch CPU baseline for bench/train_bench: one training step (forward, backward, AdamW) of
the same GPT as ETH's (pre-norm blocks, tanh GELU, untied LM head, no dropout), timed the same
way. Prints one JSON object. Not a trainer: random tokens, no data, no checkpoints.

With --serve it runs the warm-up steps, prints "ready", then one timed step per "step" line on
stdin (answering {"step_s": ...} on one line) until "quit" or end of input, then the summary:
train_bench alternates these steps with its own so that both meet the same machine load.

Run it with Debian's interpreter (/usr/bin/python3, which has python3-torch) and, for the
tuned figure, OMP_NUM_THREADS=2 GLIBC_TUNABLES=glibc.malloc.hugetlb=1, OPENBLAS_CORETYPE=SkylakeX
on a CPU with AVX-512 (Haswell on one with only AVX2; SkylakeX there dies of an illegal
instruction) and the OpenMP OpenBLAS (LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp);
the bench chooses and sets all of that (see /work/shared/notes/machine-figures.md).
"""
import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
        # torch 1.13 has no scaled_dot_product_attention: written out.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
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
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


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
    p.add_argument("--serve", action="store_true",
                   help="after warm-up, one step per 'step' line on stdin")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.layers, a.hidden, a.heads, a.max_seq, a.vocab, a.ffn)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq))
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq))

    def step():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
        return time.perf_counter() - t0, loss

    times = []
    loss = torch.zeros(())
    for _ in range(a.warmup):
        step()
    if a.serve:
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() != "step":
                break
            dt, loss = step()
            times.append(dt)
            print(json.dumps({"step_s": dt}), flush=True)
    else:
        for _ in range(a.steps):
            dt, loss = step()
            times.append(dt)
    best = min(times) if times else float("nan")
    json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(),
               "step_s_best": best, "step_s_all": times,
               "tokens_per_s": a.batch * a.seq / best, "loss": float(loss),
               "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
              sys.stdout)
    print(flush=True)


if __name__ == "__main__":
    main()
