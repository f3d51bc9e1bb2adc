"""The labeled questions: changes checked, journaled (fsync'd) and written as SQuAD JSON.

Each question has its own id and a revision that every change raises; an edit or delete
names the revision it was made from, and a stale one is refused (two tabs on one file never
overwrite each other in silence). The journal is the record: on start it is replayed (a
record names the whole question, so replaying it twice changes nothing), compacted to one
line per question, and the SQuAD file is written from it after every change.
"""

from __future__ import annotations

import secrets
import threading
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import surrogate_problem
from qa_finetune.labeling.documents import Document, DocumentSet
from qa_finetune.labeling.journal import Journal
from qa_finetune.labeling.squad_writer import squad_payload, write_squad

MAX_QUESTION_CHARS = 2000
HEADER = {"op": "start", "format": 1}


class LabelError(QAFinetuneError):
    """A change that cannot be made; ``status`` is its HTTP status."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def journal_path(output: Path) -> Path:
    """The journal beside the output: ``my-data.json`` -> ``my-data.json.journal``."""
    return output.with_name(output.name + ".journal")


def check_answer(document: Document, answer: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``[{text, answer_start}]`` for a span of the document, ``[]`` for no answer."""
    if answer is None:
        return []
    text, start = answer.get("text"), answer.get("answer_start")
    if not isinstance(text, str) or not text.strip():
        raise LabelError("the answer is empty: select some text, or mark the question unanswerable")
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise LabelError(f"answer_start must be a character offset, got {start!r}")
    if document.text[start : start + len(text)] != text:
        raise LabelError(
            f"the answer is not at character {start} of {document.key!r}: select it again"
        )
    return [{"text": text, "answer_start": start}]


def check_question(question: Any) -> str:
    if not isinstance(question, str) or not question.strip():
        raise LabelError("the question is empty: type a question")
    if len(question) > MAX_QUESTION_CHARS:
        raise LabelError(f"the question is over {MAX_QUESTION_CHARS} characters: shorten it")
    problem = surrogate_problem(question)
    if problem:  # JSON's "\ud800" escape: no file can be written with half a character
        raise LabelError(f"the question {problem}: type it again")
    return question


class _Malformed(LabelError):
    """A journal record whose fields are not those the store writes (edited by hand)."""


def _checked_record(record: dict[str, Any], document: Document) -> dict[str, Any]:
    """A journal ``put`` record as the store keeps it, every field checked (a record that
    was edited by hand is refused, not carried into the SQuAD file); ``LabelError`` when its
    answers no longer fit the document."""
    answers = record.get("answers")
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        raise _Malformed(f"'answers' must be a list of {{text, answer_start}}, got {answers!r}")
    revision = record.get("rev")
    if not isinstance(record.get("id"), str) or not record["id"]:
        raise _Malformed(f"'id' must be text, got {record.get('id')!r}")
    if not isinstance(revision, int) or isinstance(revision, bool):
        raise _Malformed(f"'rev' must be a whole number, got {revision!r}")
    try:
        check_question(record.get("question"))
    except LabelError as exc:
        raise _Malformed(str(exc)) from None
    for answer in answers:
        check_answer(document, answer)
    fields = {"id", "rev", "key", "question", "answers"}
    return {**{k: record[k] for k in fields}, "is_impossible": not answers}


class LabelStore:
    """The questions about a set of documents, saved to ``output`` as they change."""

    def __init__(self, documents: DocumentSet, output: Path) -> None:
        self.documents = documents.documents
        self._by_key = {document.key: document for document in self.documents}
        self._seeds = documents.questions
        self.output = Path(output)
        self.journal = Journal(journal_path(self.output))
        self.questions: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def open(self) -> None:
        """Lock and replay the journal (or start it from the SQuAD files' questions), compact
        it and write the output (only when that changes what it holds)."""
        if not self.journal.path.exists():
            self._check_rewritable()  # before the journal exists: a refusal leaves nothing
        self.journal.open()
        try:
            records = self.journal.replay()
            if not records:
                records = [HEADER] + [self._seed(seed) for seed in self._seeds]
            for record in records[1:] if records[0] == HEADER else records:
                self._apply(record)
            self.journal.rewrite([HEADER, *({"op": "put", **q} for q in self.questions.values())])
            if self._on_disk() != self._payload():
                self._write()
        except BaseException:
            self.journal.abandon()  # a journal this start made goes: nothing was saved
            raise

    def _check_rewritable(self) -> None:
        """Refuse an existing output without a journal that label would not write back as it
        is (paragraphs without questions, fields label does not keep such as
        ``plausible_answers``, questions without ids): rewriting it would lose them."""
        if not (self.output.exists() or self.output.is_symlink()):
            return
        if self._on_disk() != squad_payload(self.documents, self._seeds):
            raise QAFinetuneError(
                f"--output {self.output} exists and holds what label does not keep "
                "(paragraphs without questions, other fields): label never rewrites it; pass "
                "it as a document to extend its questions, and choose a new --output"
            )

    def _on_disk(self) -> Any:
        """The output's JSON as it is on disk (None: missing or not JSON)."""
        import json

        try:
            return json.loads(self.output.read_bytes())
        except (OSError, ValueError, RecursionError):
            return None

    def _payload(self) -> dict[str, Any]:
        return squad_payload(self.documents, self.questions.values())

    def close(self) -> None:
        self.journal.close()

    def _seed(self, seed: dict[str, Any]) -> dict[str, Any]:
        """A question of a SQuAD input as a journal record, checked against its document."""
        question_id = seed["id"] or secrets.token_hex(8)
        while question_id in self.questions:
            question_id = secrets.token_hex(8)
        document = self._by_key[seed["key"]]
        for answer in seed["answers"]:
            try:
                check_answer(document, answer)
            except LabelError:
                raise QAFinetuneError(
                    f"question {seed['question']!r} of {seed['key']!r}: the answer "
                    f"{answer['text']!r} is not at answer_start {answer['answer_start']}: fix "
                    "the offset in the SQuAD file"
                ) from None
        record = {"op": "put", **seed, "id": question_id, "rev": 1}
        self.questions[question_id] = record  # reserves the id; replayed below
        return record

    def _apply(self, record: dict[str, Any]) -> None:
        op, question_id, key = record.get("op"), record.get("id"), record.get("key")
        if op not in ("put", "delete") or not isinstance(question_id, str):
            raise QAFinetuneError(
                f"{self.journal.path}: a record is not a change to a question (op {op!r}, id "
                f"{question_id!r}): restore the file from a backup, or delete that record"
            )
        if op == "delete":
            self.questions.pop(question_id, None)
            return
        if not isinstance(key, str) or key not in self._by_key:
            raise QAFinetuneError(
                f"{self.journal.path}: a record names document {record.get('key')!r}, which "
                "is not among the documents given: name its file too"
            )
        try:
            checked = _checked_record(record, self._by_key[record["key"]])
        except _Malformed as exc:
            raise QAFinetuneError(
                f"{self.journal.path}: question {question_id!r} is not a journal record "
                f"({exc}): restore the file from a backup, or delete that record"
            ) from None
        except LabelError as exc:
            raise QAFinetuneError(
                f"{self.journal.path}: question {record.get('question')!r} no longer fits "
                f"{record['key']!r} ({exc}): the document changed; restore its text"
            ) from None
        self.questions[checked["id"]] = checked

    def _write(self) -> None:
        write_squad(self.output, self._payload())

    def _save(self, record: dict[str, Any]) -> None:
        self.journal.append(record)
        self._apply(record)
        self._write()

    def document(self, number: int) -> Document:
        if not 0 <= number < len(self.documents):
            raise LabelError(f"no document {number}: pick one from the list", 404)
        return self.documents[number]

    def _current(self, question_id: str, revision: int) -> dict[str, Any]:
        current = self.questions.get(question_id)
        if current is None:
            raise LabelError(f"no question {question_id!r}: it was deleted; reload", 404)
        if current["rev"] != revision:
            raise LabelError(
                f"question {question_id!r} changed elsewhere (revision {current['rev']}, this "
                f"edit was made from {revision}): reload to see it",
                409,
            )
        return current

    def create(self, number: int, question: str, answer: dict[str, Any] | None) -> dict:
        """A new question about document ``number``; ``answer`` None: unanswerable."""
        with self._lock:
            document = self.document(number)
            answers = check_answer(document, answer)
            record = {
                "op": "put",
                "id": secrets.token_hex(8),
                "rev": 1,
                "key": document.key,
                "question": check_question(question),
                "answers": answers,
                "is_impossible": not answers,
            }
            self._save(record)
            return self.questions[record["id"]]

    def update(
        self, question_id: str, revision: int, question: str, answer: dict[str, Any] | None
    ) -> dict:
        """Replace a question's text and answer, if ``revision`` is still its revision."""
        with self._lock:
            current = self._current(question_id, revision)
            answers = check_answer(self._by_key[current["key"]], answer)
            record = {
                **current,
                "op": "put",
                "rev": revision + 1,
                "question": check_question(question),
                "answers": answers,
                "is_impossible": not answers,
            }
            self._save(record)
            return self.questions[question_id]

    def delete(self, question_id: str, revision: int) -> None:
        """Delete a question, if ``revision`` is still its revision."""
        with self._lock:
            self._current(question_id, revision)
            self._save({"op": "delete", "id": question_id, "rev": revision + 1})

    def questions_about(self, number: int) -> list[dict[str, Any]]:
        key = self.document(number).key
        return [q for q in self.questions.values() if q["key"] == key]

    def counts(self) -> dict[str, int]:
        """Questions, unanswerable ones, documents, and documents without questions."""
        asked = {q["key"] for q in self.questions.values()}
        return {
            "questions": len(self.questions),
            "unanswerable": sum(q["is_impossible"] for q in self.questions.values()),
            "documents": len(self.documents),
            "documents_without_questions": sum(d.key not in asked for d in self.documents),
        }
