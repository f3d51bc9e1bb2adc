"""Answer questions from contexts of any length: windows -> model -> n-best -> character span.

TensorFlow is imported only when a model runs, so ``latest_run`` and the batch-file reader stay
cheap to import. Batches are sorted by window length and each one is padded only to its own
longest window: short windows do not pay for long ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.calibration.answers import with_confidence
from qa_finetune.calibration.confidence import Calibration
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.config import InferenceConfig
from qa_finetune.decoding.no_answer import abstains, rank_answers
from qa_finetune.decoding.spans import Predictions, null_score, postprocess_predictions
from qa_finetune.errors import InferenceError, QAFinetuneError
from qa_finetune.features.windows import (
    DEFAULT_STRIDE,
    PreprocessError,
    Windows,
    WindowSpec,
    check_question_room,
    default_max_length,
    make_spec,
    make_windows,
    model_max_length,
)
from qa_finetune.inference.inputs import checked_pairs
from qa_finetune.inference.passage_choice import answers_of, reading_of
from qa_finetune.modeling.for_answering import load_for_answering
from qa_finetune.modeling.named_model import NamedModel
from qa_finetune.modeling.predict import predict_features
from qa_finetune.retrieval.long_contexts import LongContexts

# --------------------------------------------------------------------------------------------
# Answering questions
# --------------------------------------------------------------------------------------------


@dataclass
class QuestionAnswerer:
    """A loaded model and tokenizer with fixed window and answer settings."""

    model: Any
    tokenizer: Any
    spec: WindowSpec
    # Decoding: n-best, longest answer, windows per forward pass, the no-answer threshold.
    settings: InferenceConfig = field(default_factory=InferenceConfig)
    backend: str = "tf"  # what computes the logits: "tf" (a Keras model) or "onnx"
    # The forward costs measured on this machine (a ``CostProfile``) when the batch size was
    # chosen from them; the server groups windows by length with it. None otherwise.
    profile: Any = None
    # How a question's no-answer score is made: the run's own rule, by default the null gap.
    rule: NoAnswerRule = field(default_factory=NoAnswerRule)
    # The folder the model was loaded from (None when built in memory): a run's records,
    # such as whether it was trained with questions that have no answer, are found from it.
    model_dir: Path | None = None
    # How the first answer gets its ``confidence`` (calibration.confidence); None: uncalibrated.
    calibration: Calibration | None = None
    # Told the seconds of each forward pass, to check the profile (``modeling/live_check``).
    watch: Any = None
    # Which passages of a long context are read (``retrieval.long_contexts``).
    long_contexts: LongContexts = field(default_factory=LongContexts)
    # Given the windows about to be read, a callable told how many each pass read (a
    # progress line for long work), or None for none.
    progress: Callable[[int], Callable[[int], None] | None] | None = None

    @classmethod
    def load(cls, reference: str | NamedModel, **options: Any) -> QuestionAnswerer:
        """Load once from a run dir, model dir, export folder, installed package or Hub id
        (or a model the command line named already).

        ``options`` are those of :func:`modeling.for_answering.load_for_answering`:
        ``max_length``, ``stride``, ``max_answer_length``, ``n_best``, ``batch_size``,
        ``no_answer_threshold`` (None: the run's own setting), ``backend`` (auto|tf|onnx),
        ``quantized`` and ``warn_untrained_head``.
        """
        loaded = load_for_answering(reference, **options)
        return cls(
            loaded.model,
            loaded.tokenizer,
            loaded.spec,
            loaded.settings,
            loaded.backend,
            loaded.profile,
            loaded.rule,
            loaded.model_dir,
            loaded.calibration,
            loaded.watch,
        )

    def answer_below(self, min_confidence: float | None) -> None:
        """Answer "not sure" below ``min_confidence`` (None: the settings' own minimum);
        a model without a calibration cannot, and says so."""
        if min_confidence is None:
            return
        from qa_finetune.modeling.for_answering import check_min_confidence

        check_min_confidence(min_confidence, self.calibration, self.model_dir or Path("model"))
        self.settings = dataclasses.replace(self.settings, min_confidence=min_confidence)

    def answer(
        self,
        question: str,
        context: str,
        top_k: int = 1,
        allow_no_answer: bool = False,
    ) -> list[dict[str, Any]]:
        """The ``top_k`` best answers: ``{answer, score, start, end}``, best first; a
        calibrated model adds the first answer's ``confidence`` (below the settings'
        ``min_confidence``: "not sure", ``calibration.answers``).

        A context of more than ``long_contexts.threshold_words`` words is read as its best
        passages (``retrieval.long_contexts``); offsets still point into ``context``.
        ``answer == context[start:end]``; ``score`` is the probability among the n-best
        candidates (and the "no answer" candidate with ``allow_no_answer``, returned
        as ``""`` at 0-0 and ranked first exactly when ``evaluate`` would answer "").
        """
        return self.answer_batch([(question, context)], top_k, allow_no_answer)[0]

    def answer_batch(
        self,
        pairs: Iterable[tuple[str, str] | Mapping[str, Any]],
        top_k: int = 1,
        allow_no_answer: bool = False,
    ) -> list[list[dict[str, Any]]]:
        """Answers for many (question, context) pairs; all their windows share batches."""
        if top_k < 1:
            raise InferenceError(f"top_k must be at least 1, got {top_k}")
        checked = checked_pairs(pairs)
        if not checked:
            return []
        # A long context's best passages are read, each as a pair of its own.
        reading = reading_of(self, checked)
        start, end = self.predict_windows(reading.windows.encoding)
        return answers_of(self, reading, start, end, top_k, allow_no_answer)

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
        self, encoding: Mapping[str, Any], compile: bool | None = None, passes: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Step 2, the model: start/end logits ``[windows, longest]`` of unpadded windows,
        in ``passes`` batches at once (None: as many as the cores were shared among).

        Any backend that maps window columns to these two arrays can stand in for it (the
        server's micro-batcher calls only this).
        """
        return predict_features(
            self.model,
            encoding,
            self.settings.batch_size,
            pad_token_id=self.tokenizer.pad_token_id,
            compile=compile,
            passes=passes,
            watch=_watching(self.watch, self.progress, len(encoding["input_ids"])),
        )

    def decode(
        self,
        windows: Windows,
        contexts: Sequence[str],
        start: np.ndarray,
        end: np.ndarray,
        top_k: int = 1,
        allow_no_answer: bool = False,
    ) -> list[list[dict[str, Any]]]:
        """Step 3: ranked answers per pair from its windows' logits (as ``answer`` returns)."""
        ids = [str(i) for i in range(len(contexts))]
        predictions = self.predictions(windows, contexts, start, end, top_k)
        threshold = self.settings.no_answer_threshold
        results = []
        for i, example_id in enumerate(ids):
            candidates = [
                {"answer": c["text"], "score": c["score"], "start": c["start"], "end": c["end"]}
                for c in predictions.nbest[example_id]
            ]
            null = abstain = None
            if allow_no_answer:
                rows = windows.sample_map == i
                null = null_score(start[rows], end[rows], windows.cls_index[rows])
                score = predictions.no_answer_score.get(example_id, np.inf)
                abstain = bool(abstains(score, threshold))
            ranked = rank_answers(candidates, top_k, null, threshold, abstain)
            if self.calibration is not None:
                signals = predictions.signals.get(example_id)
                minimum = self.settings.min_confidence
                ranked = with_confidence(ranked, signals, self.calibration, minimum)
            results.append(ranked)
        return results

    def predictions(
        self,
        windows: Windows,
        contexts: Sequence[str],
        start: np.ndarray,
        end: np.ndarray,
        top_k: int = 1,
    ) -> Predictions:
        """The decoded n-best lists (span logit scores too) and no-answer scores, keyed by
        the pair's number as text ("0", "1", ...)."""
        ids = [str(i) for i in range(len(contexts))]
        offsets = np.where(windows.is_context[..., None], windows.offsets, -1)
        return postprocess_predictions(
            ids,
            list(contexts),
            [ids[i] for i in windows.sample_map],
            start,
            end,
            offsets[:, : start.shape[1]],
            cls_index=windows.cls_index,
            n_best=max(self.settings.n_best, top_k),
            max_answer_length=self.settings.max_answer_length,
            rule=self.rule,
        )

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


def _watching(
    watch: Any, progress: Callable[[int], Callable[[int], None] | None] | None, total: int
) -> Any:
    """The ``watch`` of ``predict_features``: the profile's check and the progress line."""
    step = progress(total) if progress is not None else None
    if step is None:
        return watch

    def both(windows: int, length: int, seconds: float) -> None:
        if watch is not None:
            watch(windows, length, seconds)
        step(windows)

    return both


def get_answer(tokenizer: Any, model: Any, question: str, context: str) -> str:
    """The best answer span of ``context`` (the course notebook's signature, any length)."""
    max_length = default_max_length(tokenizer)
    spec = make_spec(tokenizer, max_length, min(DEFAULT_STRIDE, max_length // 2))
    return QuestionAnswerer(model, tokenizer, spec).answer(question, context)[0]["answer"]
