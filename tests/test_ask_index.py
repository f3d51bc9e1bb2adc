"""``ask --index``: answers from indexed documents, each pointing into its document's text
(CRLF, accents and emoji before the answer included), the JSON shape, the no-answer paths, a
bad index refused before the model loads, and the options that do not go together."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.cli.ask_index import excerpt
from qa_finetune.retrieval.building import IndexSettings, build_index
from qa_finetune.retrieval.index_files import DOCUMENTS, MANIFEST, SCORES
from qa_finetune.retrieval.passage_index import PassageIndex

# Each document is found by words no other one holds, so a question reads its passages only.
DOCUMENTS_TEXT = {
    "bridge.txt": "The Verrin Bay Bridge\r\n\r\nThe Verrin Bay Bridge was designed by Alma "
    "Stroud and opened in 1931.\r\nIt crosses the bay in three arches of grey granite.\r\n\r\n"
    "A toll of one copper penny was charged for each crossing until 1950.\r\n",
    "café.md": "# Café Lumen\n\nThe café Lumen serves a naïve roast of coffee beans, first "
    "roasted by Ida Marrow in 1902.\n\nIts crème brûlée is baked every morning at dawn.\n",
    "emoji.txt": "🙂🙂 🙂 The lighthouse keeper 🙂 was Tomas Ebbe, who kept the lantern for "
    "forty-one years on the basalt shelf. 🙂\n\n🙂 The lantern was electrified in 1926 🙂.\n",
}
FIELDS = {
    "answer",
    "score",
    "document",
    "start",
    "end",
    "passage",
    "passage_start",
    "passage_end",
    "passage_text",
    "retrieval_rank",
    "retrieval_score",
    "reader_score",
    "no_answer",
}
NO_ANSWER = {"answer": "", "no_answer": True, "message": "no answer in these documents"}
QUESTIONS = {
    "bridge.txt": "Who designed the Verrin Bay Bridge?",
    "café.md": "Who roasted the naïve café beans?",
    "emoji.txt": "Who was the lighthouse keeper?",
}

runner = CliRunner()


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the documents above, short passages so a document has several."""
    root = tmp_path_factory.mktemp("ask-index")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS_TEXT.items():
        (docs / name).write_bytes(text.encode("utf-8"))  # bytes: \r\n stays two characters
    build_index([docs], root / "index", IndexSettings(max_words=12))
    return root / "index"


def ask(*args: str) -> Any:
    return runner.invoke(app, ["ask", *args])


def check_answer(index: PassageIndex, item: dict[str, Any]) -> None:
    """The answer is its document's text at its offsets, inside its passage."""
    assert set(item) == FIELDS and item["no_answer"] is False
    text = index.document_text(item["document"])
    assert text[item["start"] : item["end"]] == item["answer"] != ""
    assert text[item["passage_start"] : item["passage_end"]] == item["passage_text"]
    assert item["passage_start"] <= item["start"] < item["end"] <= item["passage_end"]


def test_the_documents_have_several_passages_with_offsets(index_dir: Path) -> None:
    index = PassageIndex.open(index_dir)
    documents = [index.passage(n).document for n in range(len(index))]
    assert len(index) > len(DOCUMENTS_TEXT)
    assert {Path(d).name for d in documents} == set(DOCUMENTS_TEXT)
    bridge = next(d for d in documents if d.endswith("bridge.txt"))
    assert "\r\n" in index.document_text(bridge)  # kept as it was in the file


def test_every_answer_points_into_its_document(index_dir: Path, tiny_model_dir: Path) -> None:
    # One batch file, one model load: each question without a context is read from its
    # document's passages; the line with a context is answered from that context.
    batch = index_dir.parent / "questions.jsonl"
    lines = [{"id": name, "question": q} for name, q in QUESTIONS.items()]
    lines.append({"id": "given", "question": "Who?", "context": "Ann wrote it.\r\nBob read it."})
    batch.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    output = index_dir.parent / "answers.jsonl"
    result = ask(
        "--batch", str(batch), "--index", str(index_dir), "--model", str(tiny_model_dir),
        "--top-k", "3", "--top-passages", "2", "--output", str(output), "--overwrite",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = {r["id"]: r for r in map(json.loads, output.read_text("utf-8").splitlines())}
    index = PassageIndex.open(index_dir)
    for name in QUESTIONS:
        answers = records[name]["answers"]
        assert 1 <= len(answers) <= 3
        for item in answers:
            check_answer(index, item)
            assert item["document"].endswith(name)
        assert {k: records[name][k] for k in FIELDS} == answers[0]
    # Offsets count characters (code points): three emoji come before any answer there.
    assert all(a["start"] > 3 for a in records["emoji.txt"]["answers"])
    given = records["given"]
    assert set(given) == {"id", "question", "answer", "score", "start", "end", "answers"}
    assert "Ann wrote it.\r\nBob read it."[given["start"] : given["end"]] == given["answer"]


def test_one_answer_as_json_and_as_text(index_dir: Path, tiny_model_dir: Path) -> None:
    common = ["--index", str(index_dir), "--model", str(tiny_model_dir)]
    result = ask(QUESTIONS["café.md"], *common, "--json")
    assert result.exit_code == 0, result.output
    item = json.loads(result.stdout)
    index = PassageIndex.open(index_dir)
    check_answer(index, item)
    assert item["retrieval_rank"] >= 1 and item["retrieval_score"] > 0

    shown = ask(QUESTIONS["café.md"], *common, "--top-k", "2")
    assert shown.exit_code == 0, shown.output
    first, source, passage = shown.stdout.splitlines()[:3]
    assert first.startswith(f"1. {' '.join(item['answer'].split())}  (score ")
    assert ", reader " in first and ", retrieval " in first and ", passage rank " in first
    assert source == f"     from {item['document']}, chars {item['start']}-{item['end']}"
    assert f"«{' '.join(item['answer'].split())}»" in passage
    assert "\n" not in passage and "\r" not in passage


@pytest.mark.parametrize("as_json", [False, True])
def test_no_answer_when_every_passage_abstains(
    index_dir: Path, tiny_model_dir: Path, as_json: bool
) -> None:
    # A threshold below any no-answer score: the rule says no passage holds the answer.
    result = ask(
        QUESTIONS["bridge.txt"], "--index", str(index_dir), "--model", str(tiny_model_dir),
        "--allow-no-answer", "--no-answer-threshold", "-1e9", *(["--json"] if as_json else []),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    if as_json:
        assert json.loads(result.stdout) == NO_ANSWER
    else:
        assert result.stdout == "no answer in these documents\n"


def test_a_run_trained_with_unanswerable_questions_uses_its_rule(
    index_dir: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "model")
    (run / "config.yaml").write_text(
        "data:\n  allow_no_answer: true\ninference:\n  no_answer_threshold: -1.0e+9\n",
        encoding="utf-8",
    )
    question = QUESTIONS["bridge.txt"]
    result = ask(question, "--index", str(index_dir), "--model", str(run), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == NO_ANSWER  # no --allow-no-answer needed


def test_nothing_found_is_no_answer(index_dir: Path, tiny_model_dir: Path) -> None:
    result = ask(
        "Which xylophone did the zebra play?", "--index", str(index_dir),
        "--model", str(tiny_model_dir), "--json", "--top-k", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [NO_ANSWER]


def _copy(index_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(index_dir, target)
    return target


def _manifest(folder: Path, change: Any) -> None:
    path = folder / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    change(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")


BAD_INDEXES = {
    "missing": (lambda f: shutil.rmtree(f), "index not found: "),
    "not an index": (lambda f: (f / MANIFEST).unlink(), "is not a document index (no "),
    "damaged manifest": (lambda f: (f / MANIFEST).write_text("{"), "is damaged: rebuild"),
    "other format": (
        lambda f: _manifest(f, lambda m: m.update(format=99)),
        "was written by another version of qa-finetune (index format 99",
    ),
    "unknown stemmer": (
        lambda f: _manifest(f, lambda m: m["retriever"]["tokenizer"].update(stemmer="klingon")),
        "unknown stemmer language 'klingon'",
    ),
    "damaged documents": (
        lambda f: (f / DOCUMENTS).write_text("not json\n"),
        "line 1 is damaged: rebuild the index",
    ),
    "no scores": (lambda f: shutil.rmtree(f / SCORES), "is not a readable BM25 index"),
}


@pytest.mark.parametrize("case", list(BAD_INDEXES))
def test_a_bad_index_is_one_line_before_the_model_loads(
    index_dir: Path, tmp_path: Path, case: str
) -> None:
    damage, message = BAD_INDEXES[case]
    folder = _copy(index_dir, tmp_path)
    damage(folder)
    # No model at this path: an error about the index proves it was opened first.
    result = ask("Who?", "--index", str(folder), "--model", str(tmp_path / "no-model"))
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and message in line and "no-model" not in line


def test_stemming_without_pystemmer_is_one_line(
    index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "Stemmer", None)  # `import Stemmer` fails
    result = ask("Who?", "--index", str(index_dir), "--model", str(tmp_path / "no-model"))
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: stemming search terms (english) needs Stemmer")
    assert line.endswith("pip install 'qa-finetune[documents]'")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--context", "Some text."], "--context does not apply to --index"),
        (["--context-file", "notes.txt"], "--context-file does not apply to --index"),
    ],
)
def test_a_context_with_index_is_refused(
    index_dir: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    result = ask("Who?", "--index", str(index_dir), *extra, "--model", str(tmp_path / "none"))
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {message}: the answer comes from the indexed documents")


def test_top_passages_needs_an_index(tmp_path: Path) -> None:
    result = ask("Who?", "--context", "Ann.", "--top-passages", "3", "--model", str(tmp_path))
    assert result.exit_code == 1
    assert result.stderr == (
        "error: --top-passages 3 sets how many passages of --index are read: add --index "
        "INDEX, or drop --top-passages\n"
    )


def test_a_batch_line_without_context_needs_an_index(tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text(json.dumps({"question": "Who?"}) + "\n", encoding="utf-8")
    result = ask("--batch", str(batch), "--model", str(tmp_path / "none"))
    assert result.exit_code == 1
    assert "q.jsonl:1: missing 'context'" in result.stderr


def test_the_excerpt_marks_the_answer_on_one_line() -> None:
    text = "Alpha beta.\r\nGamma delta epsilon."
    assert excerpt(text, 13, 18) == "Alpha beta. «Gamma» delta epsilon."
    words = " ".join(f"w{i}" for i in range(200))
    start = words.index("w100")
    shown = excerpt(words, start, start + 4, width=40)
    assert shown.startswith("…w") and shown.endswith("…") and "«w100»" in shown
    assert len(shown) <= 44  # about the width: whole words only
    inner = shown.strip("…").replace("«", "").replace("»", "")
    assert all(word in words.split() for word in inner.split())


def test_asking_a_folder_of_documents_suggests_an_index_command_that_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bridge.txt").write_text(DOCUMENTS_TEXT["bridge.txt"], encoding="utf-8")
    refused = ask("Who?", "--index", "docs", "--model", "never-loaded")
    assert refused.exit_code != 0
    assert refused.output.strip().splitlines()[-1] == (
        "error: docs is not a document index (no qa-finetune-index.json): if it holds your "
        "documents, index them with qa-finetune index docs --output outputs/docs-index and "
        "ask with --index outputs/docs-index"
    )
    built = runner.invoke(app, ["index", "docs", "--output", "outputs/docs-index"])
    assert built.exit_code == 0, built.output
    assert (tmp_path / "outputs" / "docs-index" / MANIFEST).is_file()
    # Asked of the folder it runs in, the index goes beside it, never inside.
    monkeypatch.chdir(docs)
    here = ask("Who?", "--index", ".", "--model", "never-loaded")
    assert f"--output {tmp_path / 'docs-index'} and ask" in here.output
