#!/usr/bin/env python3
"""Makes the Llama fixture of tests/train/llama_hf_test.cpp (tests/data/llama/) with an
implementation independent of ETH: PyPI's transformers (LlamaForCausalLM), torch and
safetensors.

A small random Llama in fp32: 2 layers, hidden 32, 4 query heads over 2 key/value heads
(grouped-query attention), SwiGLU inner size 48, vocabulary 64, RMSNorm eps 1e-5, rotary
positions with theta 10000, no biases, untied embeddings, eager attention, no dropout. Every
parameter, the norm weights included, is drawn at a scale that makes the output depend on all
of them. One forward on a fixed batch (B = 2 rows of T = 16 token ids, and their targets: the
loss is torch's mean cross-entropy over the B*T predictions, the mean ETH's trainer computes),
one backward; everything goes into one safetensors file, fixture.safetensors:
  model.*, lm_head.weight   the weights under transformers' names (nn.Linear: (out, in))
  input_ids, targets        (B, T), token ids stored as F32 (exact: below 2^24)
  logits                    (B, T, V)
  loss                      (1)
  grad.<weight name>        the gradient of the loss with respect to every weight
and config.json (the model's dimensions, read by the test beside its own copy of them).

Usage: python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install torch \\
           --index-url https://download.pytorch.org/whl/cpu && /tmp/llvenv/bin/pip install \\
           transformers safetensors
       /tmp/llvenv/bin/python tools/make_llama_fixture.py [--out tests/data/llama]
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

B, T = 2, 16
VOCAB, LAYERS, HIDDEN, HEADS, KV_HEADS, FFN = 64, 2, 32, 4, 2, 48
THETA, EPS, POSITIONS = 10000.0, 1e-5, 64


def make_model(seed):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=KV_HEADS, max_position_embeddings=POSITIONS,
                      rms_norm_eps=EPS, rope_theta=THETA, tie_word_embeddings=False,
                      attention_bias=False, mlp_bias=False, attention_dropout=0.0,
                      hidden_act="silu")
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    return model, cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "data", "llama"))
    args = ap.parse_args()
    model, cfg = make_model(25)
    # The rotary theta the model really uses (transformers 5 keeps it in rope_parameters).
    rope = getattr(cfg, "rope_parameters", None) or {}
    theta = rope.get("rope_theta", getattr(cfg, "rope_theta", THETA))
    assert float(theta) == THETA, theta
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(0, VOCAB, (B, T), generator=gen)
    targets = torch.randint(0, VOCAB, (B, T), generator=gen)
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    loss.backward()
    out = {}
    for name, p in model.named_parameters():
        out[name] = p.detach().clone().contiguous()
        out["grad." + name] = p.grad.detach().clone().contiguous()
    out["input_ids"] = ids.float()
    out["targets"] = targets.float()
    out["logits"] = logits.detach().clone().contiguous()
    out["loss"] = loss.detach().reshape(1).clone()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "fixture.safetensors")
    save_file(out, path,
              metadata={"made_by": "tools/make_llama_fixture.py"})
    os.chmod(path, 0o644)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump({"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "kv_heads": KV_HEADS,
                   "ffn": FFN, "vocab": VOCAB, "seq_len": T, "batch": B, "rope_theta": THETA,
                   "norm_eps": EPS, "loss": loss.item()}, f, indent=1)
        f.write("\n")
    print("loss %.6f, logits in [%.3f, %.3f]" % (loss.item(), logits.min().item(),
                                                 logits.max().item()))


if __name__ == "__main__":
    main()
