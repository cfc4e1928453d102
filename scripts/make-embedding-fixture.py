#!/usr/bin/env python3
"""Writes providers/tests/fixtures/all-minilm-l6-v2.json: reference sentence embeddings of
sentence-transformers/all-MiniLM-L6-v2, for the local embedder's agreement test.

The reference is independent of the Rust code under test: the BERT forward pass is
written here from scratch in numpy (float64), and so is the tokenizer (BERT's basic
tokenizer and greedy WordPiece, read from vocab.txt). Nothing of candle or of the Rust
`tokenizers` crate is involved. If the Python `tokenizers` package happens to be
installed, its ids are compared with ours as an extra check; it is not needed.

It follows sentence-transformers' pipeline for this model (modules.json): Transformer
with max_seq_length 256 (sentence_bert_config.json), mean pooling over the attention
mask (1_Pooling/config.json), then Normalize.

Usage (numpy is the only requirement; a throwaway venv is enough):

    python3 -m venv /tmp/fixture-venv && /tmp/fixture-venv/bin/pip install numpy
    /tmp/fixture-venv/bin/python scripts/make-embedding-fixture.py \
        "$(bash scripts/fetch-test-model.sh)" providers/tests/fixtures/all-minilm-l6-v2.json
"""

import json
import math
import pathlib
import struct
import sys
import unicodedata

import numpy as np

MAX_SEQ_LENGTH = 256

SENTENCES = [
    "a cat sits on the mat",
    "a kitten is on the rug",
    "quarterly tax filing deadline",
    "The user prefers dark mode in every editor.",
    "Café au lait, naïve résumé — ÜBER déjà vu!",
    "In 2024 the meeting moved from Room 12B to the 3rd floor; call +1-555-0100.",
    "東京 is the capital of Japan",
    # Longer than 256 tokens: the reference is the embedding of its first 254 word pieces.
    " ".join(
        f"sentence {i} talks about memory, agents and retrieval." for i in range(60)
    ),
]


def load_safetensors(path):
    raw = pathlib.Path(path).read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    data = raw[8 + header_len :]
    dtypes = {"F32": np.float32, "F16": np.float16}
    tensors = {}
    for name, info in header.items():
        # Skips the metadata and integer buffers such as embeddings.position_ids.
        if name == "__metadata__" or info["dtype"] not in dtypes:
            continue
        start, end = info["data_offsets"]
        dtype = dtypes[info["dtype"]]
        array = np.frombuffer(data[start:end], dtype=dtype).reshape(info["shape"])
        tensors[name] = array.astype(np.float64)
    return tensors


# --- Tokenizer: BertTokenizer(do_lower_case=True) semantics, written out. ---


def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def basic_tokenize(text):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        if is_whitespace(ch):
            cleaned.append(" ")
        elif is_cjk(cp):
            cleaned.append(f" {ch} ")
        else:
            cleaned.append(ch)
    text = "".join(cleaned).lower()
    text = "".join(
        ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn"
    )
    tokens = []
    for word in text.split():
        current = ""
        for ch in word:
            if is_punctuation(ch):
                if current:
                    tokens.append(current)
                    current = ""
                tokens.append(ch)
            else:
                current += ch
        if current:
            tokens.append(current)
    return tokens


def wordpiece(word, vocab):
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                found = piece
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


def encode(text, vocab):
    pieces = [p for word in basic_tokenize(text) for p in wordpiece(word, vocab)]
    pieces = ["[CLS]"] + pieces[: MAX_SEQ_LENGTH - 2] + ["[SEP]"]
    return [vocab[p] for p in pieces]


# --- The BERT encoder, float64. ---


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def linear(x, w, prefix):
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


gelu_erf = np.frompyfunc(lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))), 1, 1)


def bert(ids, w, config):
    n = len(ids)
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    head_dim = config["hidden_size"] // heads
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}"

        def split(t):
            return t.reshape(n, heads, head_dim).transpose(1, 0, 2)

        q = split(linear(x, w, p + ".attention.self.query"))
        k = split(linear(x, w, p + ".attention.self.key"))
        v = split(linear(x, w, p + ".attention.self.value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, heads * head_dim)
        attended = linear(context, w, p + ".attention.output.dense")
        x = layer_norm(
            attended + x,
            w[p + ".attention.output.LayerNorm.weight"],
            w[p + ".attention.output.LayerNorm.bias"],
            eps,
        )
        hidden = gelu_erf(linear(x, w, p + ".intermediate.dense")).astype(np.float64)
        out = linear(hidden, w, p + ".output.dense")
        x = layer_norm(
            out + x, w[p + ".output.LayerNorm.weight"], w[p + ".output.LayerNorm.bias"], eps
        )
    return x


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    model_dir, out_path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    config = json.loads((model_dir / "config.json").read_text())
    st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
    assert st_config["max_seq_length"] == MAX_SEQ_LENGTH, st_config
    vocab = {}
    for index, line in enumerate((model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()):
        vocab[line] = index
    weights = load_safetensors(model_dir / "model.safetensors")

    try:
        from tokenizers import Tokenizer

        check = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        check.enable_truncation(MAX_SEQ_LENGTH)
        check.no_padding()
    except ImportError:
        check = None

    cases = []
    for text in SENTENCES:
        ids = encode(text, vocab)
        if check is not None:
            assert check.encode(text).ids == ids, f"tokenizers disagrees on {text!r}"
        hidden = bert(ids, weights, config)
        # One sentence at a time: every position is a real token, so the masked mean is
        # the plain mean.
        pooled = hidden.mean(0)
        vector = pooled / np.linalg.norm(pooled)
        cases.append(
            {
                "text": text,
                "tokens": len(ids),
                "vector": [float(f"{v:.7g}") for v in vector],
            }
        )

    out = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "produced_by": "scripts/make-embedding-fixture.py (numpy re-implementation, float64)",
        "max_seq_length": MAX_SEQ_LENGTH,
        "dimension": len(cases[0]["vector"]),
        "cases": cases,
    }
    # One case per line keeps the file small and its diffs readable.
    head = json.dumps({k: v for k, v in out.items() if k != "cases"}, ensure_ascii=False)
    lines = [json.dumps(case, ensure_ascii=False, separators=(",", ":")) for case in cases]
    text = head[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n"
    assert json.loads(text) == out
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text, encoding="utf-8")
    print(f"wrote {len(cases)} cases to {out_path}")


if __name__ == "__main__":
    main()
