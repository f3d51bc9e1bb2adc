"""The NumPy forward pass of a BERT encoder against TensorFlow's, on a tiny random BERT, and
the one-BLAS-thread block (the question's path in ``ask --index``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qa_finetune.libraries.blas_threads import available, one_blas_thread
from qa_finetune.modeling import numpy_bert


@pytest.fixture(scope="module")
def tiny_bert():
    from transformers import BertConfig, TFBertModel

    import qa_finetune.modeling.loading  # noqa: F401  (legacy Keras)

    config = BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
    )
    model = TFBertModel(config)
    model(input_ids=np.zeros((1, 3), np.int32))  # builds the weights
    return model


def test_numpy_hidden_states_match_tensorflow(tiny_bert) -> None:
    ids = np.array([[2, 17, 5, 33, 8, 49, 3]], dtype=np.int32)
    types = np.array([[0, 0, 0, 1, 1, 1, 1]], dtype=np.int32)
    expected = tiny_bert(input_ids=ids, token_type_ids=types).last_hidden_state.numpy()
    found = numpy_bert.NumpyBert.from_tf(tiny_bert).hidden(ids, types)
    assert found.shape == expected.shape == (1, 7, 32)
    assert found.dtype == np.float32
    np.testing.assert_allclose(found, expected, atol=2e-5)


def test_the_safetensors_weights_give_the_tf_models_hidden_states(
    tiny_bert, tmp_path: Path
) -> None:
    from qa_finetune.modeling.pt_weights import save_pytorch_safetensors

    # The file in PyTorch's names (as every saved run and encoder has it), pooler included.
    path = save_pytorch_safetensors(tiny_bert, tmp_path, keep_pooler=True)
    ids = np.array([[2, 17, 5, 33, 8, 49, 3]], dtype=np.int32)
    types = np.array([[0, 0, 0, 1, 1, 1, 1]], dtype=np.int32)
    from_file = numpy_bert.NumpyBert.from_safetensors(tiny_bert.config, path)
    from_model = numpy_bert.NumpyBert.from_tf(tiny_bert)
    # The same numbers, weight for weight.
    for name in ("words", "positions", "types", "norm", "layers"):
        file_leaves = _leaves(getattr(from_file, name))
        model_leaves = _leaves(getattr(from_model, name))
        assert len(file_leaves) == len(model_leaves), name
        for found, expected in zip(file_leaves, model_leaves, strict=True):
            np.testing.assert_array_equal(found, expected)
    # The file's kernels are transposed views, the model's contiguous copies: BLAS may add the
    # products in another order, so the states agree to float32 rounding, not bit for bit.
    np.testing.assert_allclose(
        from_file.hidden(ids, types), from_model.hidden(ids, types), rtol=1e-5, atol=1e-6
    )


def _leaves(value: Any) -> list[np.ndarray]:
    """The arrays of nested tuples and lists, in order."""
    if isinstance(value, tuple | list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def test_only_plain_bert_layouts_are_read(tiny_bert) -> None:
    from transformers import BertConfig, DistilBertConfig

    assert numpy_bert.supports(tiny_bert.config)
    assert not numpy_bert.supports(BertConfig(hidden_act="relu"))
    assert not numpy_bert.supports(BertConfig(position_embedding_type="relative_key"))
    assert not numpy_bert.supports(DistilBertConfig())


def test_gelu_matches_the_erf_definition() -> None:
    import math

    x = np.linspace(-6, 6, 241, dtype=np.float32)
    expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()])
    np.testing.assert_allclose(numpy_bert._gelu(x), expected, atol=1e-6)


def test_one_blas_thread_gives_the_same_products_and_restores_the_count() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((13, 64), np.float32), rng.standard_normal((64, 96), np.float32)
    before = a @ b
    with one_blas_thread():
        inside = a @ b
    np.testing.assert_allclose(inside, before, rtol=1e-5, atol=1e-5)
    if available():
        from qa_finetune.libraries.blas_threads import _set_local

        set_local = _set_local()
        original = set_local(2)
        with one_blas_thread():
            assert set_local(1) == 1  # one thread inside the block
        assert set_local(original) == 2  # the count from before, restored
