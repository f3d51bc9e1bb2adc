"""What hybrid search costs a question: search time by retriever and `ask --index` against
the gold-paragraph `ask`, on the collection of ``bench/retrieval_scale.py`` (SQuAD v1.1 dev,
other real contexts, generated filler, to ``--size`` passages).

    python bench/hybrid_latency.py --data ../shared/data --model ../shared/models/minilm-31k \\
        --size 50000 --questions 100
    python bench/hybrid_latency.py --data ../shared/data --size 500000 --questions 100 --no-ask
    python bench/hybrid_latency.py --data ../shared/data --model ../shared/models/minilm-31k \\
        --size 50000 --questions 100 --passage-vectors real-dev

The BM25 index is real. Embedding 50k passages takes hours on two shared cores, so the
passage vectors are stand-ins: ``--passage-vectors random`` (the default), random unit
vectors of dimension 384 (the encoder's): a vector search costs the same whatever the vectors
hold, so the search timings stand, but the fused scores carry noise, which makes ``ask
--index`` read more passages than real vectors would; ``real-dev``: the SQuAD dev paragraphs
(where the questions' answers are) get their real vectors (read from the embedding cache that
``evaluate --open`` on SQuAD dev fills, or embedded: minutes; a paragraph split into several
passages is embedded passage by passage) and every other passage a vector made from real
sentence embeddings (the sum of two, renormalised: ``bench/studies/sentence_vectors.py``
writes them into ``--real``), so the distractors sit where real text does. Questions are
embedded by the real encoder, as ``ask --index`` embeds them. The vectors get their
binary codes as ``index`` writes them, used from ``vectors.CODES_FROM`` passages as
``ask --index`` uses them (with random vectors the codes' candidates hold the exact best less
often than with real ones: ``bench/studies/vector_search.py``; the cost is the same).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine_line
from bench.retrieval_scale import DEV, build_collection, contexts_of, percentiles, questions_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default=None, help="the reader (not needed with --no-ask)")
    parser.add_argument("--no-ask", action="store_true", help="search only, no reading")
    parser.add_argument("--passage-vectors", choices=("random", "real-dev"), default="random")
    parser.add_argument("--real", type=Path, default=Path("/tmp/qa-finetune-sentence-vectors"))
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--work", type=Path, default=Path("/tmp/qa-finetune-hybrid-bench"))
    args = parser.parse_args()
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.inference.open_answers import answer_from_collection
    from qa_finetune.modeling.sentence_encoder import SentenceEncoder
    from qa_finetune.retrieval import vectors
    from qa_finetune.retrieval.building import build_index
    from qa_finetune.retrieval.embedding import normalise
    from qa_finetune.retrieval.index_files import is_index
    from qa_finetune.retrieval.passage_index import PassageIndex

    folder = args.work / f"collection-{args.size}"
    build_collection(args.data, args.size, folder)
    index_dir = args.work / f"index-{args.size}"
    if not is_index(index_dir):
        parts = [folder / DEV, *[folder / d for d in ("real", "filler") if (folder / d).exists()]]
        build_index(parts, index_dir)
    index = PassageIndex.open(index_dir)
    encoder = SentenceEncoder.load()
    rng = np.random.default_rng(0)
    random = normalise(rng.standard_normal((len(index), encoder.info.dimension), np.float32))
    if args.passage_vectors == "real-dev":
        random = real_dev_vectors(index, encoder, args, rng)
    began = time.perf_counter()
    graph = None
    if vectors.GRAPH_FROM is not None and len(index) >= vectors.GRAPH_FROM:
        graph = vectors.build_graph(random)
    graph_seconds = time.perf_counter() - began
    began = time.perf_counter()
    codes = vectors.BinaryCodes.of(random)
    codes_seconds = time.perf_counter() - began
    index.vectors = vectors.VectorSearch(random, encoder.info, graph, codes)
    pairs = questions_of(args.data, args.questions)
    print(machine_line())
    print(f"{len(index)} passages; graph built in {graph_seconds:.1f} s" if graph else "no graph")
    coded = len(index) >= vectors.CODES_FROM
    print(
        f"binary codes made in {codes_seconds:.1f} s; search "
        + (f"by codes, best {vectors.RESCORED} scored exactly" if coded else "exact")
    )
    encode_ms = []
    for question, _ in pairs:
        t = time.perf_counter()
        encoder.encode([question])
        encode_ms.append(1000 * (time.perf_counter() - t))
    print(f"question embedding ms: {percentiles(encode_ms)}")
    for name in ("bm25", "dense", "hybrid"):
        index.use(name, encoder)
        index.search(pairs[0][0], 5)
        times = []
        for question, _ in pairs:
            t = time.perf_counter()
            index.search(question, 5)
            times.append(1000 * (time.perf_counter() - t))
        print(f"{name} search ms: {percentiles(times)}")
    if args.no_ask or args.model is None:
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
        return
    answerer = QuestionAnswerer.load(args.model)
    answerer.answer(*pairs[0])
    rows = {}
    for name in ("bm25", "hybrid"):
        index.use(name, encoder)
        answer_from_collection(answerer, index, [pairs[0][0]], 5)
        gold_ms, open_ms = [], []
        for question, context in pairs:
            t = time.perf_counter()
            answerer.answer(question, context)
            gold_ms.append(1000 * (time.perf_counter() - t))
            t = time.perf_counter()
            answer_from_collection(answerer, index, [question], 5)
            open_ms.append(1000 * (time.perf_counter() - t))
        rows[name] = (percentiles(gold_ms), percentiles(open_ms))
        ratio = rows[name][1]["p50"] / rows[name][0]["p50"]
        print(f"ask --index ({name}) ms {rows[name][1]} vs gold {rows[name][0]}: {ratio:.2f}x")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")


def real_dev_vectors(index, encoder, args: argparse.Namespace, rng) -> np.ndarray:
    """The SQuAD dev passages' real vectors; every other passage the normalised sum of two
    real sentence vectors drawn at random."""
    from qa_finetune.modeling.embedding_cache import encode_cached
    from qa_finetune.retrieval.embedding import normalise

    sentences = np.load(args.real / "sentences.npy")
    a = rng.integers(0, len(sentences), len(index))
    b = (a + rng.integers(1, len(sentences), len(index))) % len(sentences)
    found = normalise(sentences[a] + sentences[b])
    contexts = contexts_of(args.data / DEV)
    cached = dict(zip(contexts, encode_cached(encoder, contexts), strict=True))
    split = []
    for number in range(len(index)):
        passage = index.passage(number)
        if passage.text in cached:
            found[number] = cached[passage.text]
        elif f"{DEV}#" in passage.document:
            split.append(number)
    if split:
        found[split] = encoder.encode([index.passage(n).text for n in split])
    whole = sum(index.passage(n).text in cached for n in range(len(index)))
    print(f"real vectors: {whole} whole dev paragraphs, {len(split)} parts of longer ones")
    return found


if __name__ == "__main__":
    main()
