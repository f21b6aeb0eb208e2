#!/usr/bin/python3
"""PyTorch CPU baseline for bench/train_bench on a Llama-family model: one training step
(forward, backward, AdamW) of the same decoder as ETH's llama models (RMSNorm, rotary positions,
SwiGLU MLP, grouped-query attention, no biases, the LM head tied or not), timed the same way as
tools/torch_gpt2_step.py, in fp32 or in bf16 mixed precision (torch.autocast on the CPU, fp32
weights). Prints one JSON object. Not a trainer: random tokens, no data, no checkpoints.

The model is Hugging Face transformers' own LlamaForCausalLM (scaled-dot-product attention)
where transformers is installed, else a plain torch module written out here (--impl plain
forces it). Configured as PyTorch's CPU performance tuning guide recommends for training: intra-op
threads set to the cores used, a huge-page-friendly allocator (set by the caller), fused AdamW
where this torch has it.

The --serve protocol is torch_gpt2_step.py's: warm-up steps of every precision, "ready", then
one timed step per "step fp32" / "step bf16" line on stdin (answered {"step_s": ...}) until
"quit" or end of input, then the summary.
"""
import argparse
import contextlib
import json
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * y.to(x.dtype)


def rope_tables(T, hs, theta):
    inv = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.float32) / hs))
    ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)  # (T, hs/2)
    ang = torch.cat([ang, ang], dim=-1)  # rotate-half pairing (i, i + hs/2)
    return ang.cos(), ang.sin()


def rotate(x, cos, sin):
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


class Block(nn.Module):
    def __init__(self, C, NH, KV, FF, eps):
        super().__init__()
        self.NH, self.KV, self.hs = NH, KV, C // NH
        self.ln1 = RMSNorm(C, eps)
        self.q = nn.Linear(C, C, bias=False)
        self.k = nn.Linear(C, KV * self.hs, bias=False)
        self.v = nn.Linear(C, KV * self.hs, bias=False)
        self.o = nn.Linear(C, C, bias=False)
        self.ln2 = RMSNorm(C, eps)
        self.gate = nn.Linear(C, FF, bias=False)
        self.up = nn.Linear(C, FF, bias=False)
        self.down = nn.Linear(FF, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.ln1(x)
        q = self.q(h).view(B, T, self.NH, self.hs).transpose(1, 2)
        k = self.k(h).view(B, T, self.KV, self.hs).transpose(1, 2)
        v = self.v(h).view(B, T, self.KV, self.hs).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        rep = self.NH // self.KV
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).contiguous().view(B, T, C))
        h = self.ln2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class PlainLlama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.hidden)
        self.blocks = nn.ModuleList(
            [Block(a.hidden, a.heads, a.kv_heads, a.ffn, a.norm_eps) for _ in range(a.layers)])
        self.lnf = RMSNorm(a.hidden, a.norm_eps)
        self.head = nn.Linear(a.hidden, a.vocab, bias=False)
        if a.tied:
            self.head.weight = self.wte.weight
        cos, sin = rope_tables(a.max_seq, a.hidden // a.heads, a.rope_theta)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        for b in self.blocks:
            x = b(x, cos, sin)
        return self.head(self.lnf(x))


def make_model(a):
    """The model and the name of its implementation."""
    if a.impl != "plain":
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError:
            if a.impl == "transformers":
                raise
        else:
            cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden,
                              intermediate_size=a.ffn, num_hidden_layers=a.layers,
                              num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                              max_position_embeddings=a.max_seq, rms_norm_eps=a.norm_eps,
                              rope_theta=a.rope_theta, tie_word_embeddings=a.tied,
                              attention_bias=False, mlp_bias=False, attention_dropout=0.0)
            cfg._attn_implementation = "sdpa"
            hf = LlamaForCausalLM(cfg)
            import transformers
            return (lambda idx: hf(input_ids=idx, use_cache=False).logits), hf, \
                "transformers " + transformers.__version__ + " LlamaForCausalLM (sdpa)"
    m = PlainLlama(a)
    return m, m, "plain torch module (sdpa)"


def make_optimizer(model):
    kw = dict(lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    try:
        return torch.optim.AdamW(model.parameters(), fused=True, **kw), "fused"
    except (TypeError, RuntimeError):
        return torch.optim.AdamW(model.parameters(), **kw), "default"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--max-seq", type=int, default=64)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--tied", action="store_true", help="LM head tied to the embedding")
    p.add_argument("--impl", default="auto", choices=["auto", "transformers", "plain"])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
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
    forward, module, impl = make_model(a)
    module.train()
    opt, adamw = make_optimizer(module)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq))
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq))
    precisions = a.precisions.split(",")

    def step(precision):
        ctx = (torch.autocast(device_type="cpu", dtype=torch.bfloat16)
               if precision == "bf16" else contextlib.nullcontext())
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with ctx:
            logits = forward(idx)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), tgt.view(-1))
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
    params = sum(t.numel() for t in module.parameters())
    json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(),
               "attention": "scaled_dot_product_attention", "adamw": adamw,
               "implementation": impl, "parameters": params, "step_s_all": times,
               "loss": float(loss.detach()),
               "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
              sys.stdout)
    print(flush=True)


if __name__ == "__main__":
    main()
