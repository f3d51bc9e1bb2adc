"""Tiny offline tokenizers and TF QA models, one per tokenizer family.

Each family is built from nothing that needs the network: byte-level BPE (RoBERTa,
distilroberta), WordPiece without token type ids (DistilBERT) and a sentencepiece-style
Unigram that pads on the left and puts CLS last (XLNet). Tokenizers are trained with
``tokenizers`` on the bundled sample contexts; models have 2 layers of width 32. The
tokenizer builders import no TensorFlow, so windowing tests stay light.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sample_files import sample_data_path

FAMILIES = ("bert", "roberta", "distilbert", "xlnet")
# Largest window the tiny models accept (RoBERTa's 514 positions hold 512 tokens).
MODEL_MAX_LENGTH = 512
TINY = {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64}


def sample_contexts() -> list[str]:
    """Every paragraph of the bundled sample data, in file order."""
    contexts = []
    for split in ("train", "validation"):
        data = json.loads(sample_data_path(split).read_text(encoding="utf-8"))
        contexts += [p["context"] for article in data["data"] for p in article["paragraphs"]]
    return contexts


def _texts(texts: list[str] | None) -> Iterator[str]:
    return iter(texts if texts is not None else sample_contexts())


def roberta_tokenizer(target: Path, texts: list[str] | None = None, vocab_size: int = 1000) -> Any:
    """Byte-level BPE trained on ``texts``, saved and loaded as ``RobertaTokenizerFast``."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        _texts(texts),
        vocab_size=vocab_size,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    target.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(target))
    tokenizer = RobertaTokenizerFast(
        vocab_file=str(target / "vocab.json"),
        merges_file=str(target / "merges.txt"),
        model_max_length=MODEL_MAX_LENGTH,
    )
    tokenizer.save_pretrained(str(target))
    return tokenizer


def distilbert_tokenizer(target: Path, vocab_file: Path) -> Any:
    """The uncased WordPiece vocabulary of ``vocab_file`` as ``DistilBertTokenizerFast``
    (input ids and attention mask only, like distilbert-base-uncased)."""
    from transformers import DistilBertTokenizerFast

    tokenizer = DistilBertTokenizerFast(
        vocab_file=str(vocab_file), do_lower_case=True, model_max_length=MODEL_MAX_LENGTH
    )
    target.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(target))
    return tokenizer


XLNET_SPECIALS = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]


def xlnet_tokenizer(target: Path, texts: list[str] | None = None, vocab_size: int = 1000) -> Any:
    """A sentencepiece-style Unigram (Metaspace, NFKD without accents, repeated spaces folded,
    as XLNet's converter builds it) wrapped as ``XLNetTokenizerFast``: pads on the left, lays a
    pair out as ``A <sep> B <sep> <cls>`` with type ids 0, 1 and 2."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from tokenizers.trainers import UnigramTrainer
    from transformers import XLNetTokenizerFast

    tokenizer = Tokenizer(Unigram())
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Replace("``", '"'),
            normalizers.Replace("''", '"'),
            normalizers.NFKD(),
            normalizers.StripAccents(),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=XLNET_SPECIALS,
        unk_token="<unk>",
        show_progress=False,
    )
    tokenizer.train_from_iterator(_texts(texts), trainer=trainer)
    sep, cls = tokenizer.token_to_id("<sep>"), tokenizer.token_to_id("<cls>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A:0 <sep>:0 <cls>:2",
        pair="$A:0 <sep>:0 $B:1 <sep>:1 <cls>:2",
        special_tokens=[("<sep>", sep), ("<cls>", cls)],
    )
    wrapped = XLNetTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<cls>",
        sep_token="<sep>",
        pad_token="<pad>",
        mask_token="<mask>",
        additional_special_tokens=["<eop>", "<eod>"],
    )
    target.mkdir(parents=True, exist_ok=True)
    wrapped.save_pretrained(str(target))
    return wrapped


def tiny_model(family: str, tokenizer: Any) -> Any:
    """A randomly initialised 2-layer, 32-wide TF QA model of ``family`` (built, seeded)."""
    import tensorflow as tf
    from transformers import (
        BertConfig,
        DistilBertConfig,
        RobertaConfig,
        TFBertForQuestionAnswering,
        TFDistilBertForQuestionAnswering,
        TFRobertaForQuestionAnswering,
        TFXLNetForQuestionAnsweringSimple,
        XLNetConfig,
    )

    tf.keras.utils.set_random_seed(0)
    vocab = len(tokenizer)
    if family == "bert":
        config = BertConfig(
            vocab_size=vocab,
            hidden_size=TINY["hidden"],
            num_hidden_layers=TINY["layers"],
            num_attention_heads=TINY["heads"],
            intermediate_size=TINY["intermediate"],
            max_position_embeddings=MODEL_MAX_LENGTH,
        )
        model = TFBertForQuestionAnswering(config)
    elif family == "roberta":
        config = RobertaConfig(
            vocab_size=vocab,
            hidden_size=TINY["hidden"],
            num_hidden_layers=TINY["layers"],
            num_attention_heads=TINY["heads"],
            intermediate_size=TINY["intermediate"],
            # Positions start after the padding index, as in roberta-base.
            max_position_embeddings=MODEL_MAX_LENGTH + 2,
            type_vocab_size=1,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        model = TFRobertaForQuestionAnswering(config)
    elif family == "distilbert":
        config = DistilBertConfig(
            vocab_size=vocab,
            dim=TINY["hidden"],
            n_layers=TINY["layers"],
            n_heads=TINY["heads"],
            hidden_dim=TINY["intermediate"],
            max_position_embeddings=MODEL_MAX_LENGTH,
            pad_token_id=tokenizer.pad_token_id,
        )
        model = TFDistilBertForQuestionAnswering(config)
    elif family == "xlnet":
        config = XLNetConfig(
            vocab_size=vocab,
            d_model=TINY["hidden"],
            n_layer=TINY["layers"],
            n_head=TINY["heads"],
            d_inner=TINY["intermediate"],
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        model = TFXLNetForQuestionAnsweringSimple(config)
    else:
        raise ValueError(f"unknown family {family!r}")
    model(model.dummy_inputs)
    return model


def save_tiny_model(family: str, tokenizer: Any, target: Path) -> Path:
    """``tiny_model`` and its tokenizer saved with ``save_pretrained`` into ``target``."""
    model = tiny_model(family, tokenizer)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target


def build_tokenizer(family: str, target: Path, minilm_dir: Path) -> Any:
    """The fast tokenizer of ``family``, saved in ``target`` (MiniLM's WordPiece for bert)."""
    if family == "bert":
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir))
        tokenizer.save_pretrained(str(target))
        return tokenizer
    if family == "roberta":
        return roberta_tokenizer(target)
    if family == "distilbert":
        return distilbert_tokenizer(target, minilm_dir / "vocab.txt")
    if family == "xlnet":
        return xlnet_tokenizer(target)
    raise ValueError(f"unknown family {family!r}")
