#!/usr/bin/env python3
"""Real English text for a real-embedding corpus, from the machine's own man pages.

Writes a `cortex import` file (docs/FORMAT.md) of N sentences of the English man pages
under /usr/share/man (roff stripped, 6-40 words, deduplicated, shuffled with a fixed
seed) for user "real". Import it with the local embedder and export it with its vectors:

    python3 perf/scripts/man_corpus.py 60000 > corpus.jsonl
    CORTEX_DB_PATH=real.db CORTEX_EMBED_PROVIDER=local \
      CORTEX_EMBED_MODEL_PATH="$(bash scripts/fetch-test-model.sh)" cortex import corpus.jsonl
    CORTEX_DB_PATH=real.db CORTEX_USER_ID=real cortex export --with-vectors -o real.jsonl

The pages' licences vary, so the text is made on the machine and never committed.
"""
import gzip
import json
import os
import random
import re
import sys
import uuid

ROOT = "/usr/share/man"
ESCAPES = re.compile(
    r"\\f[BIRP]|\\f\(..|\\f\[[A-Z]*\]|\\\(..|\\\[[a-z]+\]|\\[&e\-|^~0 ]|\\\*\(..|\\\*."
    r"|\\s[-+]?\d|\\[nk]\(..|\\'|\\`"
)
FONT_MACROS = (".B ", ".I ", ".BR ", ".IR ", ".BI ", ".RB ", ".IB ", ".RI ")


def pages():
    for section in sorted(os.listdir(ROOT)):
        if section.startswith("man"):
            folder = os.path.join(ROOT, section)
            for name in sorted(os.listdir(folder)):
                yield os.path.join(folder, name)


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        return f.read()


def sentences(raw):
    text = []
    for line in raw.split("\n"):
        if line.startswith((".", "'")):
            if not line.startswith(FONT_MACROS):
                text.append("\n")
                continue
            line = line.split(" ", 1)[1].replace('"', "")
        text.append(ESCAPES.sub("", line).replace("\\", ""))
    for paragraph in " ".join(text).split("\n"):
        for s in re.split(r"(?<=[.!?])\s+", paragraph.strip()):
            s = re.sub(r"\s+", " ", s).strip()
            if 6 <= len(s.split()) <= 40 and sum(c.isalpha() for c in s) >= 0.6 * len(s):
                yield s


def main():
    n = int(sys.argv[1])
    seen, out = set(), []
    for path in pages():
        try:
            raw = read(path)
        except OSError:
            continue
        if raw.startswith(".so "):
            continue
        for s in sentences(raw):
            if s.lower() not in seen:
                seen.add(s.lower())
                out.append(s)
    rng = random.Random(7)
    rng.shuffle(out)
    print(f"{len(out)} distinct sentences, writing {min(n, len(out))}", file=sys.stderr)
    header = {"type": "header", "format": "cortex-export", "version": 1,
              "exported_at": "2026-12-05T00:00:00Z", "vectors": False, "users": ["real"]}
    print(json.dumps(header))
    for s in out[:n]:
        print(json.dumps({"type": "memory", "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                          "user_id": "real", "content": s, "kind": "note", "tags": [],
                          "created_at": "2026-01-01T00:00:00Z"}))


if __name__ == "__main__":
    main()
