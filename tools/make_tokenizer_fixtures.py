#!/usr/bin/env python3
"""Makes the byte-level BPE fixtures of tests/data/tokenizer/ with Hugging Face `tokenizers`,
an implementation independent of ETH's (src/data/bpe_tokenizer.cpp).

No hub access is needed: the script TRAINS two small tokenizers with `tokenizers` itself, one in
GPT-2's style (ByteLevel pre-tokenizer with its built-in regex, <|endoftext|>) and one in
Llama-3's (a Split pre-tokenizer with Llama-3's regex, then ByteLevel without a regex,
ignore_merges, <|begin_of_text|> and friends), on Debian-shipped licence texts, and writes:
  gpt2_style.json, llama3_style.json   the tokenizer.json files
  english.txt                          a few KB of English not seen in training
  unicode.txt                          odd Unicode and special tokens written in the text
  invalid_utf8.bin                     bytes that are not UTF-8 (ETH replaces each maximal
                                       invalid subpart by U+FFFD, as Python's errors="replace")
  ids.json                             {style: {text: ids}} that `tokenizers` gives, without
                                       post-processing (add_special_tokens=False); also
                                       gpt2_prefix_space: the GPT-2 file with add_prefix_space
  pieces.json                          {style: pieces}: the pre-tokenizer's pieces of
                                       unicode.txt (byte-level text), to locate a mismatch
With --check-eth TOKENIZER_JSON TEXT... it instead checks that a tokenizer ETH trained
(`eth data --train-tokenizer`) loads in `tokenizers` and round-trips each TEXT, and with
--ids-out FILE it writes {text file stem: ids} that `tokenizers` gives (the eth_trained
fixture: eth data --train-tokenizer --vocab 1000 --text <the licences of TRAIN_FILES, joined>
--out tests/data/tokenizer/eth_trained.json, then --check-eth it english.txt unicode.txt
--ids-out tests/data/tokenizer/eth_trained_ids.json; eth_trained_llama3 likewise with
--vocab 700 --pretokenizer llama3 --special '<|begin_of_text|>' --special '<|end_of_text|>'
--special '<|eot_id|>').

Usage: python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
       /tmp/tokvenv/bin/python tools/make_tokenizer_fixtures.py [--out tests/data/tokenizer]
"""
import argparse
import json
import pathlib
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LICENSES = pathlib.Path("/usr/share/common-licenses")
TRAIN_FILES = ["GPL-3", "LGPL-2.1", "GFDL-1.3", "MPL-2.0", "Artistic"]
TEST_FILE = "Apache-2.0"

UNICODE_TEXT = (
    "Caf\u00e9 cafe\u0301 na\u00efve \u00c5ngstr\u00f6m \u0130stanbul \u1e9e\n"
    "\u4e2d\u6587\u5b57\u7b26\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001"
    "\ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8\n"
    "emoji: \U0001f600\U0001f469\u200d\U0001f4bb \U0001f44d\U0001f3fd flags \U0001f1e9\U0001f1ea!\n"
    "Arabic digits \u0661\u0662\u0663\u0664\u0665 and \u0627\u0644\u0639\u0631\u0628\u064a\u0629 "
    "\u0645\u0631\u062d\u0628\u0627\u064b\n"
    "Devanagari \u0939\u093f\u0928\u094d\u0926\u0940 \u0915\u094d\u0937\u093f "
    "Thai \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\n"
    "nbsp:a\u00a0b\u00a0\u00a0c thin\u2009space ideographic\u3000space zwsp\u200bx "
    "nel\u0085line ls\u2028ps\u2029end\n"
    "numbers 1234567 12,345.67 \u2167 \u00b2\u00b3 \u00bd \uff11\uff12\uff13 0x1F\n"
    "contractions: I'm you're we've he'll she'd it's DON'T WE'LL They'RE \u2019s 'x '\u017f\n"
    "spacing:  two   three\t\ttabs \t mixed   \n\n\n  indented\r\nwindows\r\n\r\nend   \n"
    "punct!!! ...wow?! (x) [y] {z} \"q\" \u00abguillemets\u00bb \u2014dash\u2014 #hash @at\n"
    "<|endoftext|>special<|endoftext|> <|begin_of_text|>Hi<|eot_id|><|end_of_text|>"
    "<|endoftext|<|endoftext|>>\n"
    "folds: '\u017fx 'Sx 'LLx x' ''s\n"
    "runs: aaaaaaaaaaaaaaaaaaaaaaaa ---------------- ________ 0000000000 \u0661\u0662\u0663\u0664\u0665\u0666\u0667\n"
    "ws:\r\n\r\n  x\t\n \u00a0\u00a0 b \u3000\u3000y\n\n"
    "trailing spaces at the very end   "
)

# Invalid UTF-8 of several kinds: stray continuation bytes, a truncated 3-byte sequence, an
# overlong encoding, a surrogate, a code point past U+10FFFF, 0xFF, and a truncated 4-byte
# sequence at the very end.
INVALID_BYTES = (b"ok \x80 stray \xbf\xbf cont, cut \xe2\x82 here, overlong \xc0\xaf and "
                 b"\xe0\x80\xaf, surrogate \xed\xa0\x80, big \xf4\x90\x80\x80, ff \xff\xfe "
                 b"caf\xc3\xa9 fine \xe2\x82\xac, cut4 \xf0\x9f\x98")


def train(style: str, text_files):
    tok = Tokenizer(models.BPE(ignore_merges=(style == "llama3")))
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<|endoftext|>"]
        vocab = 2000
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
        vocab = 2500
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([str(f) for f in text_files], trainer)
    return tok


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def make_fixtures(out: pathlib.Path):
    out.mkdir(parents=True, exist_ok=True)
    english = (LICENSES / TEST_FILE).read_text()[:4096]
    (out / "english.txt").write_text(english)
    (out / "unicode.txt").write_bytes(UNICODE_TEXT.encode("utf-8"))
    (out / "invalid_utf8.bin").write_bytes(INVALID_BYTES)
    texts = {"english": english, "unicode": UNICODE_TEXT,
             "invalid_utf8": INVALID_BYTES.decode("utf-8", errors="replace")}
    ids = {}
    pieces = {}
    for style in ("gpt2", "llama3"):
        tok = train(style, [LICENSES / f for f in TRAIN_FILES])
        (out / f"{style}_style.json").write_text(tok.to_str() + "\n")
        ids[style] = {}
        for name, text in texts.items():
            got = encode(tok, text)
            if tok.decode(got, skip_special_tokens=False) != text:
                sys.exit(f"{style}: tokenizers does not round-trip {name}")
            ids[style][name] = got
        pieces[style] = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(UNICODE_TEXT)]
        if style == "gpt2":
            # The same file with add_prefix_space: every piece between added tokens gets a space.
            prefixed = Tokenizer.from_str(tok.to_str())
            prefixed.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
            ids["gpt2_prefix_space"] = {"unicode": encode(prefixed, UNICODE_TEXT)}
    (out / "pieces.json").write_text(json.dumps(pieces, ensure_ascii=False) + "\n")
    (out / "ids.json").write_text(json.dumps(ids, separators=(",", ":")) + "\n")
    print(f"wrote fixtures to {out}")


def check_eth(tokenizer_json: str, text_paths, ids_out: str | None):
    tok = Tokenizer.from_file(tokenizer_json)
    ids = {}
    for text_path in text_paths:
        text = pathlib.Path(text_path).read_bytes().decode("utf-8")  # keeps \r\n
        got = encode(tok, text)
        back = tok.decode(got, skip_special_tokens=False)
        if back != text:
            sys.exit(f"{tokenizer_json}: tokenizers loads it but does not round-trip {text_path}")
        print(f"{tokenizer_json}: loads in tokenizers, {text_path}: {len(text)} characters -> "
              f"{len(got)} tokens, round-trips")
        ids[pathlib.Path(text_path).stem] = got
    if ids_out:
        pathlib.Path(ids_out).write_text(json.dumps(ids, separators=(",", ":")) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="tests/data/tokenizer")
    p.add_argument("--check-eth", nargs="+", metavar="TOKENIZER_JSON TEXT")
    p.add_argument("--ids-out")
    a = p.parse_args()
    if a.check_eth:
        if len(a.check_eth) < 2:
            p.error("--check-eth needs a tokenizer.json and at least one text")
        check_eth(a.check_eth[0], a.check_eth[1:], a.ids_out)
    else:
        make_fixtures(pathlib.Path(a.out))


if __name__ == "__main__":
    main()
