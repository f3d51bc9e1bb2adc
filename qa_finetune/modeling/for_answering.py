"""Load a model for answering: files, backend, window settings and decoding settings.

One loader for ``ask``, ``evaluate`` and ``serve``, so each resolves a model and takes a run's
settings the same way: explicit values, else the run's ``config.yaml``, else an export's
``qa_config.json``, else the defaults.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.calibration.confidence import Calibration
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.config import Config, InferenceConfig
from qa_finetune.errors import InferenceError, QAFinetuneError
from qa_finetune.features.windows import (
    DEFAULT_STRIDE,
    WindowSpec,
    default_max_length,
    make_spec,
)
from qa_finetune.modeling.batch_policy import CostProfile
from qa_finetune.modeling.named_model import NamedModel

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    """What answering needs: the model (Keras or an ONNX predictor), its tokenizer, windows
    and decoding settings."""

    model_dir: Path
    model: Any
    tokenizer: Any
    spec: WindowSpec
    settings: InferenceConfig
    backend: str  # "tf" or "onnx"
    # The forward costs measured on this machine when the batch size was chosen from them.
    profile: CostProfile | None = None
    # How a question's no-answer score is made (the run's or the export's; default null gap).
    rule: NoAnswerRule = field(default_factory=NoAnswerRule)
    # How answers get their confidence (the run's or the export's); None: uncalibrated.
    calibration: Calibration | None = None
    # Told the seconds of each real forward pass, to check the profile (modeling/live_check).
    watch: Callable[[int, int, float], None] | None = None


def load_for_answering(
    reference: str | NamedModel,
    max_length: int | None = None,
    stride: int | None = None,
    max_answer_length: int | None = None,
    n_best: int | None = None,
    batch_size: int | None = None,
    no_answer_threshold: float | None = None,
    min_confidence: float | None = None,
    backend: str = "auto",
    quantized: bool = False,
    warn_untrained_head: bool = True,
    tune_batch: bool = False,
) -> LoadedModel:
    """Load ``reference`` (resolved here when given as a string); settings left as None come
    from the run.

    ``backend="auto"`` runs ``model.onnx`` with ONNX Runtime when the folder has one, without
    importing TensorFlow (with TensorFlow weights beside it too: the faster of the two here,
    ``modeling/backend_choice``); ``quantized`` picks ``model.int8.onnx`` instead. A
    model without a QA head gets a logged warning unless ``warn_untrained_head`` is False.
    ``tune_batch``: a batch size nobody chose becomes the fastest measured here (``tuned``).
    """
    from qa_finetune.modeling.backend_choice import faster_backend, measurable
    from qa_finetune.modeling.formats import choose_backend

    named = NamedModel.of(reference)
    model_dir = named.model_dir
    chosen = choose_backend(model_dir, backend, quantized)
    trained = named.config
    # An export's own settings; a run's config.yaml wins over them below.
    exported = named.exported
    tokenizer = _tokenizer(model_dir, chosen, exported)
    spec = _window_settings(tokenizer, trained, exported, max_length, stride)
    settings = inference_settings(
        trained,
        exported,
        n_best=n_best,
        max_answer_length=max_answer_length,
        batch_size=batch_size,
        no_answer_threshold=no_answer_threshold,
        min_confidence=min_confidence,
    )
    if measurable(model_dir, backend, chosen, quantized):

        def load(name: str) -> tuple[Any, Any]:
            return _model(model_dir, name, False, False), _tokenizer(model_dir, name, exported)

        chosen = faster_backend(model_dir, spec.max_length, load)
        tokenizer = _tokenizer(model_dir, chosen, exported)
    rule = named.rule
    calibration = named.calibration
    check_min_confidence(settings.min_confidence, calibration, model_dir)
    model = _model(model_dir, chosen, quantized, warn_untrained_head)
    loaded = LoadedModel(model_dir, model, tokenizer, spec, settings, chosen, rule=rule)
    loaded.calibration = calibration
    if tune_batch and batch_size is None and not chosen_batch(trained, exported):
        _tune_batch(loaded)
    return loaded


def _tune_batch(loaded: LoadedModel) -> None:
    """The batch size measured fastest here (``tuned``), and a watch on live passes that
    measures again when they disagree with the profile (``modeling/live_check``)."""
    loaded.settings, loaded.profile = tuned(loaded)
    if loaded.profile is not None:
        from qa_finetune.modeling.batch_profile import live_check

        loaded.watch = live_check(
            loaded.model, loaded.model_dir, loaded.backend, loaded.spec.max_length, loaded.profile
        )


def check_min_confidence(
    min_confidence: float | None, calibration: Calibration | None, model_dir: Path
) -> None:
    """A minimum confidence needs a calibrated model: one clear line otherwise."""
    if min_confidence is not None and calibration is None:
        raise InferenceError(
            f"--min-confidence needs a calibrated model, and {model_dir} has no calibration: "
            "run `qa-finetune calibrate --model RUN --data HELD_OUT.json` first"
        )


def _model(model_dir: Path, backend: str, quantized: bool, warn_untrained_head: bool) -> Any:
    """The Keras model (``tf``) or the runtime's predictor of ``model_dir``."""
    if backend != "tf":
        from qa_finetune.modeling.formats import load_predictor

        return load_predictor(model_dir, backend, quantized)
    from qa_finetune.modeling.loading import load_qa_model, untrained_head_warning

    warning = untrained_head_warning(model_dir) if warn_untrained_head else None
    if warning:
        log.warning(warning)
    return load_qa_model(model_dir)


def chosen_batch(trained: Config | None, exported: Mapping[str, Any]) -> bool:
    """Whether a run or an export names a batch size of its own. A run's ``config.yaml``
    holds every setting, chosen or not: only a value other than the default counts."""
    stored = trained.inference.batch_size if trained else exported.get("batch_size")
    return stored is not None and stored != InferenceConfig().batch_size


def tuned(
    loaded: LoadedModel, fallback: int | None = None
) -> tuple[InferenceConfig, CostProfile | None]:
    """``loaded``'s settings with the batch size measured fastest on this machine (or
    ``fallback`` when measuring is turned off, by default the configured size), and the
    profile it was chosen from (None when not measured)."""
    from qa_finetune.modeling.batch_profile import tuned_batch_size

    size, profile = tuned_batch_size(
        loaded.model,
        loaded.tokenizer,
        loaded.model_dir,
        loaded.backend,
        loaded.spec.max_length,
        fallback=loaded.settings.batch_size if fallback is None else fallback,
    )
    return dataclasses.replace(loaded.settings, batch_size=size), profile


def _tokenizer(model_dir: Path, backend: str, exported: Mapping[str, Any]) -> Any:
    """The ONNX path reads ``tokenizer.json`` without transformers (its import is most of a
    cold start); an export whose ``qa_config.json`` is missing or predates the settings that
    needs falls back to transformers' tokenizer, as the TensorFlow path loads it."""
    from qa_finetune.modeling.reference import load_tokenizer

    if backend != "tf":
        from qa_finetune.modeling.export_tokenizer import ExportTokenizer

        light = ExportTokenizer.load(model_dir, exported)
        if light is not None:
            return light
    return load_tokenizer(model_dir)


def _window_settings(
    tokenizer: Any,
    trained: Config | None,
    exported: Mapping[str, Any],
    max_length: int | None,
    stride: int | None,
) -> WindowSpec:
    if max_length is None:
        if trained:
            max_length = trained.preprocess.max_length
        else:
            max_length = int(exported.get("max_length", default_max_length(tokenizer)))
    if stride is None:
        trained_stride = (
            trained.preprocess.stride if trained else int(exported.get("stride", DEFAULT_STRIDE))
        )
        # Half a window at most, so a smaller --max-length alone still works.
        stride = min(trained_stride, max_length // 2)
    return make_spec(tokenizer, max_length, stride)


def inference_settings(
    trained: Config | None, exported: Mapping[str, Any], **explicit: Any
) -> InferenceConfig:
    """Decoding settings: explicit values (not None) over the run's ``inference`` section,
    else over an export's ``qa_config.json``, else the defaults; checked like a config."""
    base = trained.inference.to_dict() if trained else dict(exported)
    base.update({k: v for k, v in explicit.items() if v is not None})
    try:
        return InferenceConfig.from_dict(base)
    except QAFinetuneError as exc:
        raise InferenceError(str(exc)) from None
