"""Model families: each family's facts in one module."""

from __future__ import annotations

import json
from pathlib import Path


def test_family_facts(tmp_path: Path) -> None:
    from qa_finetune.modeling import families
    from qa_finetune.training.memory import encoder_shape

    assert families.suggested() == "BERT, RoBERTa, DistilBERT, ALBERT, ELECTRA, XLNet or MPNet"
    assert len(families.shape_keys()) == 3  # BERT-like names, DistilBERT's, XLNet's
    assert set(families.TOKENIZER_ANCHORS) < set(families.TOKENIZER_FILES)
    for keys in families.shape_keys():
        (tmp_path / "config.json").write_text(
            json.dumps(dict(zip(keys, (2, 32, 4, 64), strict=True)))
        )
        shape = encoder_shape(tmp_path)
        assert shape is not None
        assert (shape.layers, shape.hidden, shape.heads, shape.feed_forward) == (2, 32, 4, 64)
