#!/usr/bin/env python3
"""HNSW against IVFFlat on the vectors of a `cortex export --with-vectors` file, in psql.

The last QUERIES memories are held out as queries; the rest go into a scratch table
`realv`. Each search is the store's own shape: the index's ORDER BY over
(embedding::halfvec(d)) <=> q LIMIT 50, re-ranked by the full-precision distance, top 10.
Recall@10 is against a sequential scan. Each query runs three times (the median kept);
the index kinds alternate, two rounds, each index built afresh (lists: one per thousand
rows). Needs psycopg (pip install "psycopg[binary]"); the table is dropped at the end.

    python3 perf/scripts/ann_psql.py real.jsonl 200 postgresql://postgres@127.0.0.1:5432/postgres
"""
import json
import statistics
import sys
import time

import psycopg

SEARCH = (
    "SELECT id FROM (SELECT id, embedding <=> %(q)s::vector AS d FROM realv "
    "ORDER BY embedding::halfvec({d}) <=> %(q)s::vector::halfvec({d}) LIMIT 50) c "
    "ORDER BY d, id LIMIT 10"
)
PLANS = {
    "hnsw m=16 ef_construction=64": ("hnsw.ef_search", [40, 100, 300]),
    "ivfflat": ("ivfflat.probes", [2, 4, 7, 12]),
}


def literal(v):
    return "[" + ",".join(repr(x) for x in v) + "]"


def main():
    path, queries, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(path) as f:
        vectors = [r["embedding"] for r in map(json.loads, f) if r.get("type") == "memory"]
    base, held = vectors[:-queries], [literal(v) for v in vectors[-queries:]]
    d = len(base[0])
    cur = psycopg.connect(url, autocommit=True).cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    cur.execute("DROP TABLE IF EXISTS realv")
    cur.execute(f"CREATE TABLE realv (id int primary key, embedding vector({d}))")
    with cur.copy("COPY realv (id, embedding) FROM STDIN") as copy:
        for i, v in enumerate(base):
            copy.write_row((i, literal(v)))
    cur.execute("VACUUM ANALYZE realv")
    cur.execute("SET maintenance_work_mem = '2GB'")
    exact = []
    for q in held:
        cur.execute("SELECT id FROM realv ORDER BY embedding <=> %s::vector LIMIT 10", (q,))
        exact.append({r[0] for r in cur.fetchall()})
    search = SEARCH.format(d=d)

    def measure(setting, value):
        cur.execute(f"SET {setting} = {value}")
        found, times = [], []
        for q in held:
            runs = []
            for _ in range(3):
                start = time.perf_counter()
                cur.execute(search, {"q": q})
                ids = {r[0] for r in cur.fetchall()}
                runs.append(time.perf_counter() - start)
            found.append(ids)
            times.append(statistics.median(runs))
        recall = statistics.mean(len(a & b) / 10 for a, b in zip(found, exact))
        return statistics.median(times) * 1e3, recall

    results = {}
    for rnd in range(2):
        for kind, (setting, values) in PLANS.items():
            cur.execute("DROP INDEX IF EXISTS realv_ann")
            start = time.perf_counter()
            if kind.startswith("hnsw"):
                cur.execute(f"CREATE INDEX realv_ann ON realv USING hnsw ((embedding::halfvec({d})) "
                            "halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)")
            else:
                lists = max(1, len(base) // 1000)
                cur.execute(f"CREATE INDEX realv_ann ON realv USING ivfflat ((embedding::halfvec({d})) "
                            f"halfvec_cosine_ops) WITH (lists = {lists})")
            built = time.perf_counter() - start
            cur.execute("SELECT pg_relation_size('realv_ann')")
            size = cur.fetchone()[0]
            print(f"round {rnd + 1}: {kind} built in {built:.1f} s, {size / 1e6:.0f} MB", flush=True)
            for v in values:
                results.setdefault((kind, setting, v), []).append(measure(setting, v))
    print(f"\n{len(base)} memories of {d} dimensions, {queries} held-out queries\n")
    print("| index | setting | p50 (ms), two rounds | recall@10 |\n|---|---|---:|---:|")
    for (kind, setting, v), runs in results.items():
        p50s = " / ".join(f"{p:.2f}" for p, _ in runs)
        print(f"| {kind} | {setting} {v} | {p50s} | {runs[0][1]:.3f} |")
    cur.execute("DROP TABLE realv")


if __name__ == "__main__":
    main()
