"""The tokenizer of an export folder, read with ``tokenizers`` alone (no transformers).

Importing transformers costs about a second on a 2-core CPU, most of a cold ``ask`` through
ONNX. Windows need only the Rust tokenizer (``tokenizer.json``) and a few facts that the
export wrote to ``qa_config.json`` (special tokens, pair order, model inputs), so this class
offers the part of the transformers fast-tokenizer interface that ``features/windows`` and
``QuestionAnswerer`` use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.modeling.families import FAST_TOKENIZER

# qa_config.json keys this tokenizer needs; an older export without them uses transformers.
REQUIRED = ("question_first", "cls_token_id", "pad_token_id", "input_names", "model_max_length")


class ExportTokenizer:
    """``tokenizer.json`` plus the export's settings, shaped like a transformers fast tokenizer."""

    is_fast = True

    def __init__(self, backend: Any, settings: dict[str, Any]) -> None:
        self.backend_tokenizer = backend
        self.padding_side = "right" if settings["question_first"] else "left"
        self.truncation_side = settings.get("truncation_side", "right")
        self.cls_token_id = settings["cls_token_id"]
        self.pad_token_id = settings["pad_token_id"]
        self.model_input_names = list(settings["input_names"])
        self.model_max_length = int(settings["model_max_length"])
        # A copy that never pads or truncates, for encoding questions on their own.
        from tokenizers import Tokenizer

        self._plain = Tokenizer.from_str(backend.to_str())
        self._plain.no_padding()
        self._plain.no_truncation()

    @classmethod
    def load(cls, folder: Path, settings: dict[str, Any]) -> ExportTokenizer | None:
        """The folder's tokenizer, or None when it lacks ``tokenizer.json`` or a setting."""
        path = Path(folder) / FAST_TOKENIZER
        if not path.is_file() or any(key not in settings for key in REQUIRED):
            return None
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)), settings)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        processor = self.backend_tokenizer.post_processor
        return processor.num_special_tokens_to_add(pair) if processor is not None else 0

    def __call__(self, texts: list[str], add_special_tokens: bool = True) -> dict[str, Any]:
        """``{"input_ids": [...]}`` for a list of single texts (no padding or truncation)."""
        encodings = self._plain.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in encodings]}
