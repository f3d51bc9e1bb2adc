"""Answer questions from contexts of any length: windows -> model -> n-best -> character span.

TensorFlow is imported only when a model runs, so ``latest_run`` and the batch-file reader stay
cheap to import. Batches are sorted by window length and each one is padded only to its own
longest window: short windows do not pay for long ones.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from qa_finetune.config import Config, InferenceConfig, load_config
from qa_finetune.core.arrays import Ragged
from qa_finetune.core.no_answer import rank_answers
from qa_finetune.core.spans import null_score, postprocess_predictions
from qa_finetune.core.windows import (
    PreprocessError,
    Windows,
    WindowSpec,
    check_question_room,
    make_windows,
    model_max_length,
    window_spec,
)
from qa_finetune.errors import QAFinetuneError

# Logit written beyond the end of a window: exp(-1e4) is 0, and it stays finite in float16 sums.
LOGIT_FILL = -1e4
DEFAULT_MAX_LENGTH = 384
DEFAULT_STRIDE = 128
# Tokenizers report "no limit" as a huge sentinel (int(1e30)); anything above this is not a cap.
_NO_LIMIT = 1_000_000
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Pairs answered per model pass when reading a batch file: bounds memory, keeps batches full.
FILE_CHUNK = 256

# Tracing a model into a graph costs seconds (about 7 s for MiniLM on a 2-core CPU) and then
# saves the eager overhead of every batch (about 0.3 s there): a model is compiled once it has
# run this many batches, so one `ask` stays eager and quick while evaluation compiles at once.
COMPILE_AFTER_BATCHES = 16


class InferenceError(QAFinetuneError):
    """A question, context or input file cannot be answered as given."""


# --------------------------------------------------------------------------------------------
# Batched prediction
# --------------------------------------------------------------------------------------------


def _ragged(column: Any) -> Ragged:
    """A list column from Arrow (no Python ints are made) or from plain lists, as int32."""
    # pyarrow is imported only for Arrow columns: a cold `ask` on plain lists skips its import.
    if type(column).__module__.startswith("pyarrow"):
        return Ragged.from_arrow(column, dtype=np.int32)
    return Ragged.from_lists(column, dtype=np.int32)


def _input_columns(features: Any) -> dict[str, Ragged]:
    """The model input columns of a ``datasets.Dataset`` or of a mapping of lists."""
    if hasattr(features, "with_format"):
        table = features.with_format("arrow")[:]
        names = [n for n in INPUT_NAMES if n in table.column_names]
        return {name: _ragged(table.column(name)) for name in names}
    return {name: _ragged(features[name]) for name in INPUT_NAMES if name in features}


@dataclass
class _ModelState:
    """Per model: compiled forwards by input names, and batches run eagerly so far."""

    forwards: dict[tuple[str, ...], Any] = field(default_factory=dict)
    eager_batches: int = 0


# Weak keys, so a dropped model frees its graphs.
_MODELS: weakref.WeakKeyDictionary[Any, _ModelState] = weakref.WeakKeyDictionary()


def _state(model: Any) -> _ModelState:
    try:
        return _MODELS.setdefault(model, _ModelState())
    except TypeError:  # an object that cannot be weakly referenced: nothing is remembered
        return _ModelState()


def _compiled(model: Any, state: _ModelState, names: tuple[str, ...]) -> Any:
    """A ``tf.function`` of the model for any batch and length: traced once, not per shape."""
    import tensorflow as tf

    if names not in state.forwards:
        # A weak reference, so the cached graph does not keep the model alive.
        model_ref = weakref.ref(model)
        signature = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}

        @tf.function(input_signature=[signature])
        def forward(inputs: dict[str, Any]) -> tuple[Any, Any]:
            outputs = model_ref()(inputs, training=False)
            return outputs.start_logits, outputs.end_logits

        state.forwards[names] = forward
    return state.forwards[names]


def _forward(model: Any, names: tuple[str, ...], batches: int, compile: bool | None) -> Any:
    """The compiled forward, or the eager model while compiling would not pay off yet."""
    state = _state(model)
    if compile is None:
        compile = names in state.forwards or (state.eager_batches + batches > COMPILE_AFTER_BATCHES)
    if compile:
        return _compiled(model, state, names)
    state.eager_batches += batches

    def eager(inputs: dict[str, Any]) -> tuple[Any, Any]:
        outputs = model(inputs, training=False)
        return outputs.start_logits, outputs.end_logits

    return eager


def _pad_token_id(model: Any) -> int:
    value = getattr(getattr(model, "config", None), "pad_token_id", None)
    return int(value) if isinstance(value, int) else 0


def predict_features(
    model: Any,
    features: Any,
    batch_size: int,
    pad_token_id: int | None = None,
    compile: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits ``[features, longest window]`` (float32) in the features' order.

    ``features`` is a ``datasets.Dataset`` (or a mapping of lists) with ``input_ids``,
    ``attention_mask`` and optionally ``token_type_ids``, unpadded. Windows are run in
    length-sorted batches, each padded to its own longest window; positions beyond a window's
    end hold ``LOGIT_FILL``. ``compile=None`` runs a ``tf.function`` of the model once it has
    run ``COMPILE_AFTER_BATCHES`` batches (at once for a call with more), eagerly before.
    """
    if batch_size < 1:
        raise InferenceError(f"batch size must be at least 1, got {batch_size}")
    columns = _input_columns(features)
    if "input_ids" not in columns:
        raise InferenceError("features have no input_ids column: build them with preprocess")
    lengths = columns["input_ids"].lengths
    count, width = len(lengths), int(lengths.max(initial=0))
    start = np.full((count, width), LOGIT_FILL, dtype=np.float32)
    end = np.full((count, width), LOGIT_FILL, dtype=np.float32)
    if count == 0:
        return start, end
    names = tuple(columns)
    if callable(getattr(model, "predict_batch", None)):
        forward = model.predict_batch  # a Predictor (ONNX Runtime, a serving layer's own)
    else:
        forward = _forward(model, names, -(-count // batch_size), compile)
    fills = {"input_ids": _pad_token_id(model) if pad_token_id is None else pad_token_id}
    # Longest first: a batch that does not fit in memory fails at once, not at the end.
    order = np.argsort(-lengths, kind="stable")
    for begin in range(0, count, batch_size):
        rows = order[begin : begin + batch_size]
        longest = int(lengths[rows].max())
        batch = {
            name: column.padded(rows, longest, fills.get(name, 0))
            for name, column in columns.items()
        }
        start_logits, end_logits = forward(batch)
        # Mixed-precision models return float16 logits; scores are computed in float32.
        start_logits = np.asarray(start_logits, dtype=np.float32)
        end_logits = np.asarray(end_logits, dtype=np.float32)
        for k, (s, e) in enumerate(zip(start_logits, end_logits, strict=True)):
            size = lengths[rows[k]]
            start[rows[k], :size] = s[:size]
            end[rows[k], :size] = e[:size]
    return start, end


# --------------------------------------------------------------------------------------------
# Answering questions
# --------------------------------------------------------------------------------------------


def _text(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str):
        raise InferenceError(f"{where}the {what} must be text, got {type(value).__name__}")
    if not value.strip():
        fix = (
            "ask a question such as 'Who designed the bridge?'"
            if what == "question"
            else "give the text that holds the answer (--context, --context-file or stdin)"
        )
        raise InferenceError(f"{where}the {what} is empty: {fix}")
    return value


def check_pair(question: Any, context: Any) -> None:
    """Raise ``InferenceError`` unless both are non-empty text (cheap: no model needed)."""
    _text(question, "question", "")
    _text(context, "context", "")


def _pairs(items: Iterable[Any]) -> list[tuple[str, str]]:
    """(question, context) tuples from tuples or {question, context} dicts, checked."""
    items = list(items)
    pairs = []
    for number, item in enumerate(items, 1):
        where = f"pair {number}: " if len(items) > 1 else ""
        if isinstance(item, Mapping):
            missing = [key for key in ("question", "context") if key not in item]
            if missing:
                raise InferenceError(f"{where}missing '{missing[0]}': give question and context")
            question, context = item["question"], item["context"]
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            question, context = item
        else:
            raise InferenceError(
                f"{where}expected a (question, context) pair or a dict with both, "
                f"got {type(item).__name__}"
            )
        pairs.append((_text(question, "question", where), _text(context, "context", where)))
    return pairs


@dataclass
class QuestionAnswerer:
    """A loaded model and tokenizer with fixed window and answer settings."""

    model: Any
    tokenizer: Any
    spec: WindowSpec
    max_answer_length: int = 30
    n_best: int = 20
    batch_size: int = 64
    backend: str = "tf"  # what computes the logits: "tf" (a Keras model) or "onnx"
    # SQuAD v2: "" wins when the null score beats the best span by more than this.
    null_threshold: float = 0.0

    @classmethod
    def load(
        cls,
        reference: str,
        max_length: int | None = None,
        stride: int | None = None,
        max_answer_length: int | None = None,
        n_best: int | None = None,
        batch_size: int | None = None,
        warn_untrained_head: bool = True,
        backend: str = "auto",
        quantized: bool = False,
        null_threshold: float | None = None,
    ) -> QuestionAnswerer:
        """Load once from a run dir, model dir, export folder, installed package or Hub id.

        A run directory's ``config.yaml`` (or an export's ``qa_config.json``) supplies every
        setting left as None: the windows it was trained with and its ``inference`` section
        (n-best size, longest answer, batch size, no-answer threshold); explicit arguments win.
        ``backend="auto"`` runs ``model.onnx`` with ONNX Runtime when the folder has one,
        without importing TensorFlow; ``quantized`` picks
        ``model.int8.onnx`` instead. A TensorFlow model whose checkpoint has no QA head (a
        base encoder) gets a warning on stderr unless ``warn_untrained_head`` is False.
        """
        from qa_finetune.modeling.onnx_backend import (
            OnnxPredictor,
            choose_backend,
            onnx_file,
            qa_config,
        )
        from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir

        model_dir = resolve_model_dir(reference)
        chosen = choose_backend(model_dir, backend, quantized)
        trained = run_config(model_dir)
        # An export's own settings; a run's config.yaml wins over them below.
        exported = qa_config(model_dir)
        if chosen == "onnx":
            from qa_finetune.modeling.export_tokenizer import ExportTokenizer

            # Without transformers: its import is most of a cold start.
            tokenizer = ExportTokenizer.load(model_dir, exported)
        else:
            tokenizer = load_tokenizer(model_dir)
        if max_length is None:
            if trained:
                max_length = trained.preprocess.max_length
            else:
                max_length = int(exported.get("max_length", default_max_length(tokenizer)))
        if stride is None:
            trained_stride = (
                trained.preprocess.stride
                if trained
                else int(exported.get("stride", DEFAULT_STRIDE))
            )
            # Half a window at most, so a smaller --max-length alone still works.
            stride = min(trained_stride, max_length // 2)
        spec = make_spec(tokenizer, max_length, stride)
        settings = inference_settings(
            trained,
            exported,
            n_best=n_best,
            max_answer_length=max_answer_length,
            batch_size=batch_size,
            null_score_diff_threshold=null_threshold,
        )
        decoding = {
            "max_answer_length": settings.max_answer_length,
            "n_best": settings.n_best,
            "batch_size": settings.batch_size,
            "null_threshold": settings.null_score_diff_threshold,
        }
        if chosen == "onnx":
            predictor = OnnxPredictor.load(onnx_file(model_dir, quantized))
            return cls(predictor, tokenizer, spec, backend="onnx", **decoding)
        from qa_finetune.modeling.loading import load_qa_model, untrained_head_warning

        warning = untrained_head_warning(model_dir) if warn_untrained_head else None
        if warning:
            print(warning, file=sys.stderr, flush=True)
        model = load_qa_model(model_dir)
        return cls(model, tokenizer, spec, **decoding)

    def inference_config(self) -> InferenceConfig:
        """This answerer's decoding settings as the config section ``evaluate`` takes."""
        return InferenceConfig(
            n_best=self.n_best,
            max_answer_length=self.max_answer_length,
            null_score_diff_threshold=self.null_threshold,
            batch_size=self.batch_size,
        )

    def answer(
        self,
        question: str,
        context: str,
        top_k: int = 1,
        handle_impossible_answer: bool = False,
    ) -> list[dict[str, Any]]:
        """The ``top_k`` best answers: ``{answer, score, start, end}``, best first.

        ``answer == context[start:end]``; ``score`` is the probability among the n-best
        candidates (and the "no answer" candidate with ``handle_impossible_answer``, returned
        as ``""`` at 0-0 and ranked first exactly when ``evaluate`` would answer "").
        """
        return self.answer_batch([(question, context)], top_k, handle_impossible_answer)[0]

    def answer_batch(
        self,
        pairs: Iterable[tuple[str, str] | Mapping[str, Any]],
        top_k: int = 1,
        handle_impossible_answer: bool = False,
    ) -> list[list[dict[str, Any]]]:
        """Answers for many (question, context) pairs; all their windows share batches."""
        if top_k < 1:
            raise InferenceError(f"top_k must be at least 1, got {top_k}")
        checked = _pairs(pairs)
        if not checked:
            return []
        contexts = [c for _, c in checked]
        windows = self.windows([q for q, _ in checked], contexts)
        start, end = self.predict_windows(windows.encoding)
        return self.decode(windows, contexts, start, end, top_k, handle_impossible_answer)

    def windows(self, questions: Sequence[str], contexts: Sequence[str]) -> Windows:
        """Step 1: the strided windows of checked (question, context) pairs; a question too
        long for the windows is an ``InferenceError`` naming its number (from 1)."""
        ids = [str(i) for i in range(1, len(questions) + 1)]
        try:
            return make_windows(
                {"id": ids, "question": list(questions), "context": list(contexts)},
                self.tokenizer,
                self.spec,
            )
        except PreprocessError as exc:
            raise InferenceError(str(exc)) from None

    def predict_windows(
        self, encoding: Mapping[str, Any], compile: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Step 2, the model: start/end logits ``[windows, longest]`` of unpadded windows.

        Any backend that maps window columns to these two arrays can stand in for it (the
        server's micro-batcher calls only this).
        """
        return predict_features(
            self.model,
            encoding,
            self.batch_size,
            pad_token_id=self.tokenizer.pad_token_id,
            compile=compile,
        )

    def decode(
        self,
        windows: Windows,
        contexts: Sequence[str],
        start: np.ndarray,
        end: np.ndarray,
        top_k: int = 1,
        handle_impossible_answer: bool = False,
    ) -> list[list[dict[str, Any]]]:
        """Step 3: ranked answers per pair from its windows' logits (as ``answer`` returns)."""
        ids = [str(i) for i in range(len(contexts))]
        offsets = np.where(windows.is_context[..., None], windows.offsets, -1)
        predictions = postprocess_predictions(
            ids,
            list(contexts),
            [ids[i] for i in windows.sample_map],
            start,
            end,
            offsets[:, : start.shape[1]],
            cls_index=windows.cls_index,
            n_best=max(self.n_best, top_k),
            max_answer_length=self.max_answer_length,
        )
        results = []
        for i, example_id in enumerate(ids):
            candidates = [
                {"answer": c["text"], "score": c["score"], "start": c["start"], "end": c["end"]}
                for c in predictions.nbest[example_id]
            ]
            null = None
            if handle_impossible_answer:
                rows = windows.sample_map == i
                null = null_score(start[rows], end[rows], windows.cls_index[rows])
            results.append(rank_answers(candidates, top_k, null, self.null_threshold))
        return results

    def check_questions(
        self, questions: Sequence[str], labels: Sequence[str] | None = None
    ) -> None:
        """Fail clearly when a question leaves no room for context in a window (the windows'
        own rule); ``labels`` prefix the message of each question (default: its number)."""
        tokenizer = self.tokenizer
        stripped = [q.strip() for q in questions]
        lengths = [len(ids) for ids in tokenizer(stripped, add_special_tokens=False)["input_ids"]]
        try:
            check_question_room(
                lengths,
                tokenizer.num_special_tokens_to_add(pair=True),
                self.spec,
                model_max_length(tokenizer),
                labels,
            )
        except QAFinetuneError as exc:
            raise InferenceError(str(exc)) from None


def inference_settings(
    trained: Config | None, exported: Mapping[str, Any], **explicit: Any
) -> InferenceConfig:
    """Decoding settings: explicit values (not None) over the run's ``inference`` section,
    else over an export's ``qa_config.json``, else the defaults; checked like a config."""
    base = dataclasses.asdict(trained.inference) if trained else {}
    if not trained:
        known = {f.name for f in dataclasses.fields(InferenceConfig)}
        base = {k: v for k, v in exported.items() if k in known}
    base.update({k: v for k, v in explicit.items() if v is not None})
    try:
        return InferenceConfig(**base)
    except QAFinetuneError as exc:
        raise InferenceError(str(exc)) from None


def default_max_length(tokenizer: Any) -> int:
    """``DEFAULT_MAX_LENGTH``, or less for a model that takes fewer tokens per window."""
    return min(DEFAULT_MAX_LENGTH, model_max_length(tokenizer) or DEFAULT_MAX_LENGTH)


def make_spec(tokenizer: Any, max_length: int, stride: int) -> WindowSpec:
    """Window settings, checked with the config rules so errors name the option."""
    from qa_finetune.config import PreprocessConfig

    PreprocessConfig(max_length=max_length, stride=stride)
    return window_spec(tokenizer, max_length, stride)


def run_dir_of(model_dir: Path) -> Path | None:
    """The run directory that holds ``model_dir`` (``RUN/model`` with ``RUN/config.yaml``)."""
    parent = model_dir.parent
    if model_dir.name == "model" and (parent / "config.yaml").is_file():
        return parent
    return None


def run_config(model_dir: Path) -> Config | None:
    """The config a run was trained with; None for other models or an unreadable file."""
    run_dir = run_dir_of(model_dir)
    if run_dir is None:
        return None
    try:
        return load_config(run_dir / "config.yaml")
    except (OSError, QAFinetuneError):
        return None


def get_answer(tokenizer: Any, model: Any, question: str, context: str) -> str:
    """The best answer span of ``context`` (the course notebook's signature, any length)."""
    max_length = default_max_length(tokenizer)
    spec = make_spec(tokenizer, max_length, min(DEFAULT_STRIDE, max_length // 2))
    return QuestionAnswerer(model, tokenizer, spec).answer(question, context)[0]["answer"]


# --------------------------------------------------------------------------------------------
# Runs and batch files
# --------------------------------------------------------------------------------------------


def latest_run(output_dir: Path) -> Path:
    """The most recently trained run under ``output_dir`` (one with ``model/config.json``)."""
    output_dir = Path(output_dir)
    runs = (
        # Hidden folders are runs being replaced by `train --overwrite`, not runs to use.
        [
            p
            for p in output_dir.iterdir()
            if not p.name.startswith(".") and (p / "model" / "config.json").is_file()
        ]
        if output_dir.is_dir()
        else []
    )
    if not runs:
        raise InferenceError(
            f"no trained run in {output_dir}/: train one with `qa-finetune train` or pass --model"
        )
    return max(runs, key=lambda p: (p / "model" / "config.json").stat().st_mtime)


@dataclass
class _Line:
    number: int
    id: str
    question: str
    context: str


def _parse_line(raw: str, number: int) -> _Line:
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InferenceError(f"not valid JSON ({exc.msg})") from exc
    if not isinstance(record, Mapping):
        raise InferenceError("each line must be a JSON object {question, context[, id]}")
    for key in ("question", "context"):
        if key not in record:
            raise InferenceError(f"missing '{key}'")
        _text(record[key], key, "")
    raw_id = record.get("id")
    example_id = str(number) if raw_id in (None, "") else str(raw_id)
    return _Line(number, example_id, record["question"], record["context"])


def read_batch_file(path: Path, skip_errors: bool) -> tuple[list[_Line], int]:
    """Parse every line first, so a bad line fails before any answer is written.

    Lines are split on ``\\n`` and decoded one by one: a line that is not UTF-8 is one bad
    line (skipped with ``skip_errors``), and contexts keep their bytes (``\\r\\n`` included).
    """
    from qa_finetune.core.textio import BOM, check_file, decode_utf8

    check_file(path, "batch file", "--batch")
    lines, failed = [], 0
    for number, data in enumerate(Path(path).read_bytes().split(b"\n"), 1):
        if not data.strip():
            continue
        try:
            raw = decode_utf8(data, "line")
            lines.append(_parse_line(raw.removeprefix(BOM), number))
        except QAFinetuneError as exc:
            reason = str(exc).removeprefix("line: ")
            if not skip_errors:
                raise InferenceError(
                    f"{path}:{number}: {reason}; fix the line or pass --skip-errors"
                ) from None
            print(f"{path}:{number}: {reason} (skipped)", file=sys.stderr)
            failed += 1
    return lines, failed


def answer_batch_file(
    answerer: QuestionAnswerer,
    path: Path,
    output: Path | None,
    top_k: int = 1,
    handle_impossible_answer: bool = False,
    skip_errors: bool = False,
    parsed: tuple[list[_Line], int] | None = None,
) -> tuple[int, int]:
    """Answer a JSON Lines file of ``{question, context[, id]}``; returns (written, failed).

    Each output line holds ``id, question, answer, score, start, end`` (and ``answers``, the
    ranked list, when ``top_k > 1``). Output goes to ``output`` or stdout. ``parsed`` is what
    ``read_batch_file`` returned, when the caller read the file before loading the model.
    """
    lines, failed = parsed if parsed is not None else read_batch_file(Path(path), skip_errors)
    # A question too long for the windows is a per-line problem too.
    good = []
    for line in lines:
        try:
            answerer.check_questions([line.question], labels=[f"{path}:{line.number}: "])
        except InferenceError as exc:
            if not skip_errors:
                raise InferenceError(f"{exc}; fix the line or pass --skip-errors") from exc
            print(f"{exc} (skipped)", file=sys.stderr)
            failed += 1
            continue
        good.append(line)
    handle: IO[str] = output.open("w", encoding="utf-8") if output is not None else sys.stdout
    written = 0
    try:
        for begin in range(0, len(good), FILE_CHUNK):
            chunk = good[begin : begin + FILE_CHUNK]
            results = answerer.answer_batch(
                [(line.question, line.context) for line in chunk], top_k, handle_impossible_answer
            )
            for line, answers in zip(chunk, results, strict=True):
                record: dict[str, Any] = {"id": line.id, "question": line.question, **answers[0]}
                if top_k > 1:
                    record["answers"] = answers
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
    finally:
        if output is not None:
            handle.close()
        else:
            handle.flush()
    return written, failed
