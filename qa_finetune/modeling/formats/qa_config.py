"""``qa_config.json``: what a serving folder needs to window and decode like ``ask``.

It serialises the window spec (``WindowSpec.to_dict``) and the decoding settings
(``InferenceConfig.to_dict``), plus the tokenizer facts a stack without transformers needs
(special tokens, pair layout, model inputs). Reading checks each known key's type and keeps
unknown ones; a file without some keys (an older export) is read as it is: the reader falls
back to the run's settings or the defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qa_finetune.calibration.confidence import Calibration
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.formats.base import OUTPUT_NAMES, input_names

QA_CONFIG = "qa_config.json"
_TOKEN_IDS = ("cls_token_id", "pad_token_id")


def qa_settings(model_dir: Path, tokenizer: Any) -> dict[str, Any]:
    """What a serving stack needs to window and decode like ``qa-finetune ask``: the run's
    window and decoding settings (the defaults for a model folder outside a run)."""
    from qa_finetune.config import InferenceConfig, PreprocessConfig
    from qa_finetune.features.windows import WindowSpec
    from qa_finetune.runs.calibration_file import read_calibration
    from qa_finetune.runs.lookup import run_config, run_dir_of, run_rule

    trained = run_config(model_dir)
    run_dir = run_dir_of(Path(model_dir))
    saved = run_rule(run_dir) if run_dir is not None else None
    calibration = read_calibration(run_dir) if run_dir is not None else None
    window = trained.preprocess if trained else PreprocessConfig()
    decoding = (trained.inference if trained else InferenceConfig()).to_dict()
    # The batch size belongs to the machine that answers, not to the model.
    del decoding["batch_size"]
    question_first = tokenizer.padding_side == "right"
    spec = WindowSpec(window.max_length, window.stride, question_first=question_first)
    return {
        **spec.to_dict(),
        **decoding,
        "truncation_side": getattr(tokenizer, "truncation_side", "right"),
        "pair_template": _pair_template(tokenizer, question_first),
        "cls_token": tokenizer.cls_token,
        "cls_token_id": tokenizer.cls_token_id,
        "cls_index": "position of cls_token_id in each window's input_ids",
        "pad_token_id": tokenizer.pad_token_id,
        "input_names": list(input_names(tokenizer)),
        "output_names": list(OUTPUT_NAMES),
        "model_max_length": min(int(tokenizer.model_max_length), 1_000_000),
        # How "no answer" is decided: the run's saved rule, applied to no_answer_threshold.
        "no_answer_rule": (saved.rule if saved else NoAnswerRule()).to_dict(),
        # How an answer's confidence is made (decoding/confidence.py); null: uncalibrated.
        "calibration": calibration.to_dict() if calibration else None,
    }


def _pair_template(tokenizer: Any, question_first: bool) -> list[str]:
    """The pair layout with the question and context marked, e.g. [CLS] Q [SEP] C [SEP]."""
    encoding = tokenizer("Q", "C")
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    first, second = ("<question>", "<context>") if question_first else ("<context>", "<question>")
    return [
        token if sequence is None else (first if sequence == 0 else second)
        for token, sequence in zip(tokens, encoding.sequence_ids(), strict=True)
    ]


def read_qa_config(model_dir: Path) -> dict[str, Any]:
    """The export's ``qa_config.json`` (window and decoding settings), or ``{}``."""
    path = Path(model_dir) / QA_CONFIG
    if not path.is_file():
        return {}
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise QAFinetuneError(f"{path} is not valid JSON ({exc}): export the model again") from exc
    if not isinstance(values, dict):
        return {}
    for key, value in values.items():
        _check_setting(path, key, value)
    if "no_answer_rule" in values:  # checked here, so a damaged export fails at load
        NoAnswerRule.from_dict(values["no_answer_rule"], f"{path} ('no_answer_rule')")
    if values.get("calibration") is not None:
        Calibration.from_dict(values["calibration"], f"{path} ('calibration')")
    if _OLD_THRESHOLD in values:  # an export written before the key was renamed
        values.setdefault("no_answer_threshold", values.pop(_OLD_THRESHOLD))
    return values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# qa_config.json's name for no_answer_threshold in earlier releases.
_OLD_THRESHOLD = "null_score_diff_threshold"
# The type each setting that is read back must have, and how the message names it.
_SETTING_TYPES: dict[str, tuple[Any, str]] = {
    **{
        key: (_is_int, "a whole number")
        for key in ("max_length", "stride", "n_best", "max_answer_length", "model_max_length")
    },
    **{
        key: (lambda v: v is None or (_is_int(v) and v >= 0), "a token id (>= 0)")
        for key in _TOKEN_IDS
    },
    **{
        key: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
        for key in ("no_answer_threshold", _OLD_THRESHOLD)
    },
    "min_confidence": (
        lambda v: (
            v is None or (isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1)
        ),
        "null or a number from 0 to 1",
    ),
    "question_first": (lambda v: isinstance(v, bool), "true or false"),
    "truncation_side": (lambda v: v in ("left", "right"), '"left" or "right"'),
    "input_names": (
        lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
        "a list of input names",
    ),
}


def _check_setting(path: Path, key: str, value: Any) -> None:
    """A setting of the wrong type is a one-line error naming the file and the key."""
    if key not in _SETTING_TYPES:
        return
    check, expected = _SETTING_TYPES[key]
    if not check(value):
        shown = json.dumps(value)[:40]
        raise QAFinetuneError(
            f"{path}: {key!r} must be {expected}, not {shown}: fix it or export the model again"
        )
