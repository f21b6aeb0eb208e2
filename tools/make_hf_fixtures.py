#!/usr/bin/env python3
"""Makes the Hugging Face GPT-2 and Llama fixtures of tests/hf (tests/data/hf/) with an
implementation independent of ETH: PyPI's transformers, torch and safetensors.

A small random GPT2LMHeadModel (2 layers, hidden 32, 4 heads, vocabulary 300, 64 positions)
whose every parameter, layer norms and biases included, is drawn at a scale that makes the
output depend on all of them, saved by save_pretrained:
  gpt2_f32/          fp32, one model.safetensors, tied embeddings
  gpt2_f32_sharded/  the same weights, sharded (max_shard_size small: several shards + index)
  gpt2_bf16/         the same weights rounded to bf16
  gpt2_f16_untied/   other weights, fp16, tie_word_embeddings false (its own lm_head.weight)
plus batch.bin, a token file in llm.c's format (ETH's `eth data` format) of B*T+1 tokens, and
expected.json: for each model the loss transformers computes on the batch (rows b are tokens
[b*T, b*T+T+1), labels = the inputs, so the loss is the mean over B*T next-token predictions),
evaluated in fp32 on the stored weights, and a summary of the logits.

Llama (--only llama makes just these): a small random LlamaForCausalLM (2 layers, hidden 32,
4 query heads of size 8, SwiGLU inner size 64, vocabulary 128, 64 positions), every parameter drawn at a scale that makes the output depend on it, saved by
save_pretrained:
  llama_f32/          fp32, one model.safetensors, 2 key/value heads (grouped-query
                      attention), untied (its own lm_head.weight), rms_norm_eps 1e-6, RoPE
                      base 10000
  llama_f32_sharded/  the same weights, sharded (several shards + index)
  llama_bf16_tied/    other weights rounded to bf16, 4 key/value heads (multi-head),
                      tie_word_embeddings true, rms_norm_eps 1e-5, RoPE base 500000
plus llama_batch.bin (B*T+1 tokens below 128) and llama_expected.json, the same measures as
expected.json, each folder loaded by from_pretrained in fp32, and loss_fp64 (loaded in float64).

With --check DIR it instead loads an exported folder (eth convert --to-hf) with transformers and
prints its loss on batch.bin, for comparing with the fixture by hand.

Usage: python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install torch transformers safetensors
       /tmp/hfvenv/bin/python tools/make_hf_fixtures.py [--out tests/data/hf]
"""
import argparse
import json
import os
import shutil
import struct

import torch
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM)

B, T = 4, 32
VOCAB, LAYERS, HIDDEN, HEADS, POSITIONS = 300, 2, 32, 4, 64
LLAMA_VOCAB, LLAMA_KV_HEADS, LLAMA_FFN = 128, 2, 64


def write_token_file(path, tokens):
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def read_token_file(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        return list(struct.unpack("<%dH" % header[2], f.read(2 * header[2])))


def random_model(seed, tied):
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=POSITIONS, n_embd=HIDDEN, n_layer=LAYERS,
                     n_head=HEADS, tie_word_embeddings=tied, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or \
                    name.endswith("ln_f.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn_like(p))
            else:
                p.copy_(0.25 * torch.randn_like(p))
        if not tied:
            model.lm_head.weight.copy_(0.25 * torch.randn_like(model.lm_head.weight))
    return model


def batch_rows(tokens):
    return torch.tensor([tokens[b * T: b * T + T + 1] for b in range(B)], dtype=torch.long)


def evaluate(model, rows):
    model = model.float().eval()
    with torch.no_grad():
        out = model(input_ids=rows, labels=rows)
    logits = out.logits[:, :-1, :]
    return {
        "loss": float(out.loss),
        "logits_sum": float(logits.double().sum()),
        "logits_abs_mean": float(logits.double().abs().mean()),
        "logits_first": [float(x) for x in logits[0, 0, :8]],
    }


def save(model, path, dtype, **kw):
    if os.path.exists(path):
        shutil.rmtree(path)
    model.to(dtype).save_pretrained(path, safe_serialization=True, **kw)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(path, extra)):
            os.remove(os.path.join(path, extra))


def make(out):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, VOCAB, (B * T + 1,), generator=g).tolist()
    write_token_file(os.path.join(out, "batch.bin"), tokens)
    rows = batch_rows(tokens)
    expected = {"batch": B, "seq_len": T, "transformers": __import__("transformers").__version__,
                "torch": torch.__version__, "models": {}}

    tied = random_model(1, tied=True)
    expected["models"]["gpt2_f32"] = evaluate(tied, rows)
    save(tied, os.path.join(out, "gpt2_f32"), torch.float32)
    save(tied, os.path.join(out, "gpt2_f32_sharded"), torch.float32, max_shard_size="60KB")
    save(tied, os.path.join(out, "gpt2_bf16"), torch.bfloat16)
    # The bf16 weights evaluated in fp32 (what ETH's fp32 eval of the converted file computes),
    # and the same weights run in bf16 by transformers (for the bf16 tolerance).
    tied_bf16 = random_model(1, tied=True).to(torch.bfloat16)
    expected["models"]["gpt2_bf16"] = evaluate(tied_bf16.float(), rows)
    with torch.no_grad():
        bf = random_model(1, tied=True).to(torch.bfloat16)
        expected["models"]["gpt2_bf16"]["loss_bf16_compute"] = float(
            bf(input_ids=rows, labels=rows).loss)

    untied = random_model(2, tied=False).to(torch.float16)
    expected["models"]["gpt2_f16_untied"] = evaluate(untied.float(), rows)
    save(random_model(2, tied=False), os.path.join(out, "gpt2_f16_untied"), torch.float16)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(json.dumps(expected, indent=1))


def random_llama(seed, tied, eps, theta, kv_heads):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=LLAMA_VOCAB, hidden_size=HIDDEN, intermediate_size=LLAMA_FFN,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=kv_heads, max_position_embeddings=POSITIONS,
                      rms_norm_eps=eps, tie_word_embeddings=tied,
                      rope_parameters={"rope_type": "default", "rope_theta": theta})
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    if tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def evaluate_folder(folder, rows):
    """The saved folder as a user loads it, in fp32, and its loss in float64. Loaded, not the
    in-memory model: casting a model to bf16 also rounds the rotary inverse frequencies buffer,
    which from_pretrained recomputes in fp32 (a 1e-5-nat difference at base 500000)."""
    out = evaluate(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), rows)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    with torch.no_grad():
        out["loss_fp64"] = float(model(input_ids=rows, labels=rows).loss)
    return out


def make_llama(out):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(11)
    tokens = torch.randint(0, LLAMA_VOCAB, (B * T + 1,), generator=g).tolist()
    write_token_file(os.path.join(out, "llama_batch.bin"), tokens)
    rows = batch_rows(tokens)
    expected = {"batch": B, "seq_len": T, "transformers": __import__("transformers").__version__,
                "torch": torch.__version__, "models": {}}
    untied = random_llama(3, tied=False, eps=1e-6, theta=10000.0, kv_heads=LLAMA_KV_HEADS)
    save(untied, os.path.join(out, "llama_f32"), torch.float32)
    save(untied, os.path.join(out, "llama_f32_sharded"), torch.float32, max_shard_size="30KB")
    tied = random_llama(4, tied=True, eps=1e-5, theta=500000.0, kv_heads=HEADS)
    save(tied, os.path.join(out, "llama_bf16_tied"), torch.bfloat16)
    for name in ("llama_f32", "llama_f32_sharded", "llama_bf16_tied"):
        expected["models"][name] = evaluate_folder(os.path.join(out, name), rows)
    with open(os.path.join(out, "llama_expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(json.dumps(expected, indent=1))


def check(folder, batch):
    model = AutoModelForCausalLM.from_pretrained(folder)
    print(json.dumps({"folder": folder, **evaluate(model, batch_rows(read_token_file(batch)))}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "data", "hf"))
    ap.add_argument("--check", help="an exported folder to load with transformers")
    ap.add_argument("--batch", help="token file for --check (default OUT/batch.bin)")
    ap.add_argument("--only", choices=["gpt2", "llama"], help="make one family's fixtures")
    a = ap.parse_args()
    if a.check:
        check(a.check, a.batch or os.path.join(a.out, "batch.bin"))
        return
    if a.only != "llama":
        make(a.out)
    if a.only != "gpt2":
        make_llama(a.out)


if __name__ == "__main__":
    main()
