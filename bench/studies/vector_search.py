"""Vector search for the dense half of document search, measured: exact NumPy (a float32
matrix product and argpartition) against binary codes re-scored exactly (``vectors.py``),
FAISS (exact inner product, and HNSW) and usearch (HNSW): recall@10 against the exact top
10, how often the exact nearest comes first, latency of one question, build time, memory.

    python bench/studies/vector_search.py --size 50000
    python bench/studies/vector_search.py --size 500000 --skip faiss-flat
    python bench/studies/vector_search.py --size 500000 --vectors pairs \
        --real /tmp/qa-finetune-sentence-vectors --skip faiss-flat faiss-knn hnsw usearch

``--vectors random`` (the default): random unit vectors of dimension 384 (all-MiniLM-L6-v2's),
seeded; each question is a stored vector plus noise of the same size, so its nearest
neighbour is that vector. Random vectors are the hardest case for any approximate search:
every other vector is about equally far from a question.

``--vectors pairs`` and ``--vectors noise`` are built from real embeddings, written by
``bench/studies/sentence_vectors.py`` into ``--real``: sentences of SQuAD v1.1 dev and the
three SQuADShifts files, embedded by the default encoder, and real SQuAD dev questions
embedded by it. ``pairs``: each stored vector is the normalised sum of two different real
sentence vectors drawn at random (a two-sentence passage, roughly as mean pooling sees one),
plus every sentence vector itself. ``noise``: each real sentence vector repeated to the size
with Gaussian noise of norm 0.3 added, renormalised. The questions are the real ones; the
truth is the exact search over the stored vectors. Each size runs in its own process, so
peak memory is the method's own.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line

DIMENSION = 384
K = 10
PLANTED: list[int] = []


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def exact_top(vectors: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    scores = vectors @ query
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(name: str, search, queries: np.ndarray, truth: list[set]) -> dict:
    """Recall of the exact top 10, and how often the planted neighbour (the stored vector
    each question was made from: the exact best) comes first."""
    times, found, first = [], 0, 0
    for query, expected, planted in zip(queries, truth, PLANTED, strict=True):
        began = time.perf_counter()
        top = search(query)
        times.append(1000 * (time.perf_counter() - began))
        found += len(expected & {int(i) for i in top})
        first += int(len(top) > 0 and int(top[0]) == planted)
    times.sort()
    row = {
        "method": name,
        "recall@10": round(100 * found / (K * len(queries)), 2),
        "planted first": round(100 * first / len(queries), 2),
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3),
    }
    print(row, flush=True)
    return row


def stored_and_questions(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """The stored vectors and the questions of ``--vectors``."""
    rng = np.random.default_rng(0)
    if args.vectors == "random":
        vectors = unit(rng.standard_normal((args.size, DIMENSION), dtype=np.float32))
        picks = rng.integers(0, args.size, args.questions)
        noise = unit(rng.standard_normal((args.questions, DIMENSION), dtype=np.float32))
        return vectors, unit(vectors[picks] + noise)
    sentences = np.load(args.real / "sentences.npy")
    queries = np.load(args.real / "questions.npy")[: args.questions]
    print(f"{len(sentences)} real sentence vectors, {len(queries)} real questions")
    vectors = np.empty((args.size, DIMENSION), dtype=np.float32)
    kept = min(len(sentences), args.size)
    vectors[:kept] = sentences[:kept]
    for first in range(kept, args.size, 65_536):
        rows = min(65_536, args.size - first)
        if args.vectors == "pairs":
            a = rng.integers(0, len(sentences), rows)
            b = (a + rng.integers(1, len(sentences), rows)) % len(sentences)
            block = sentences[a] + sentences[b]
        else:
            block = sentences[rng.integers(0, len(sentences), rows)]
            block = block + 0.3 * unit(rng.standard_normal((rows, DIMENSION), np.float32))
        vectors[first : first + rows] = unit(block)
    return vectors, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--vectors", choices=("random", "pairs", "noise"), default="random")
    parser.add_argument("--real", type=Path, default=Path("/tmp/qa-finetune-sentence-vectors"))
    parser.add_argument("--rescored", type=int, nargs="*", default=[200, 500, 1000, 2000])
    parser.add_argument("--skip", nargs="*", default=[])
    args = parser.parse_args()
    vectors, queries = stored_and_questions(args)
    truth = [set(exact_top(vectors, q, K).tolist()) for q in queries]
    PLANTED.extend(int(exact_top(vectors, q, 1)[0]) for q in queries)
    print(machine_line())
    print(f"{args.size} vectors of {DIMENSION} ({args.vectors}): {vectors.nbytes / 2**20:.0f} MB")
    base = rss_mb()
    results = []
    if "numpy" not in args.skip:
        results.append(measure("numpy exact", lambda q: exact_top(vectors, q, K), queries, truth))
    if "codes" not in args.skip:
        results.extend(measure_codes(vectors, queries, truth, args.rescored))
    if all(m in args.skip for m in ("faiss-flat", "faiss-knn", "hnsw", "usearch")):
        print_table(results, base)
        return
    import faiss

    faiss.omp_set_num_threads(1)  # one question at a time, as `ask` searches
    if "faiss-flat" not in args.skip:
        flat = faiss.IndexFlatIP(DIMENSION)
        flat.add(vectors)
        results.append(
            measure("faiss flat", lambda q: flat.search(q[None], K)[1][0], queries, truth)
        )
        del flat
        gc.collect()
    if "faiss-knn" not in args.skip:
        results.append(
            measure(
                "faiss knn (exact, no copy)",
                lambda q: faiss.knn(q[None], vectors, K, metric=faiss.METRIC_INNER_PRODUCT)[1][0],
                queries,
                truth,
            )
        )
    from qa_finetune.retrieval.vectors import GRAPH_BUILD_DEPTH, GRAPH_LINKS

    for m in () if "hnsw" in args.skip else (GRAPH_LINKS,):
        began = time.perf_counter()
        faiss.omp_set_num_threads(2)
        hnsw = faiss.IndexHNSWFlat(DIMENSION, m, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = GRAPH_BUILD_DEPTH
        hnsw.add(vectors)
        built = time.perf_counter() - began
        faiss.omp_set_num_threads(1)
        size = faiss.serialize_index(hnsw).nbytes / 2**20
        for ef in (64, 128, 256):
            hnsw.hnsw.efSearch = ef
            row = measure(
                f"faiss HNSW M{m} efC{GRAPH_BUILD_DEPTH} ef{ef}",
                lambda q, graph=hnsw: graph.search(q[None], K)[1][0],
                queries,
                truth,
            )
            results.append({**row, "build_s": round(built, 1), "index_mb": round(size)})
        hnsw = None
        gc.collect()
    if "usearch" not in args.skip:
        from usearch.index import Index

        began = time.perf_counter()
        found = Index(ndim=DIMENSION, metric="ip", dtype="f32", connectivity=16, expansion_add=128)
        found.add(np.arange(args.size), vectors, threads=2)
        built = time.perf_counter() - began
        size = found.memory_usage / 2**20
        for ef in (32, 64, 128):
            found.expansion_search = ef
            row = measure(
                f"usearch HNSW M16 ef{ef}", lambda q: found.search(q, K).keys, queries, truth
            )
            results.append({**row, "build_s": round(built, 1), "index_mb": round(size)})
    print_table(results, base)


def measure_codes(
    vectors: np.ndarray, queries: np.ndarray, truth: list[set], rescored: list[int]
) -> list[dict]:
    """Binary codes ranked by Hamming distance, their best ``rescored`` scored exactly: the
    product's search (``VectorSearch.top`` with codes), one BLAS thread."""
    from qa_finetune.libraries.blas_threads import one_blas_thread
    from qa_finetune.retrieval import vectors as product
    from qa_finetune.retrieval.embedding import EncoderInfo

    began = time.perf_counter()
    codes = product.BinaryCodes.of(vectors)
    built = time.perf_counter() - began
    size = (codes.words.nbytes + codes.centre.nbytes) / 2**20
    info = EncoderInfo("bench", "0" * 16, DIMENSION, "mean", 256)
    search = product.VectorSearch(vectors, info, codes=codes)
    rows = []
    saved = product.CODES_FROM, product.RESCORED
    product.CODES_FROM = 0
    try:
        for count in rescored:
            product.RESCORED = count

            def found(q: np.ndarray) -> list[int]:
                with one_blas_thread():
                    return [n for n, _ in search.top(q, K)]

            row = measure(f"binary codes, best {count} scored exactly", found, queries, truth)
            rows.append({**row, "build_s": round(built, 1), "index_mb": round(size, 1)})
    finally:
        product.CODES_FROM, product.RESCORED = saved
    return rows


def print_table(results: list[dict], base: float) -> None:
    print(f"peak RSS {rss_mb():.0f} MB (vectors and data {base:.0f} MB before the methods)")
    print("| method | recall@10 vs exact | nearest first | p50 ms | p95 ms | build s | index MB |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['method']} | {r['recall@10']} | {r['planted first']} | {r['p50_ms']} | "
            f"{r['p95_ms']} | "
            f"{r.get('build_s', '-')} | {r.get('index_mb', '-')} |"
        )


if __name__ == "__main__":
    main()
