"""``--format onnx``: ``model.onnx`` (and ``model.int8.onnx`` with ``--quantize int8``), run
by ONNX Runtime without TensorFlow; the ``onnx`` extra.

tf2onnx lowers the exact GELU to ``Erfc``, which ONNX has no operator for: a custom handler
rewrites it as ``1 - Erf(x)``. The graph takes int64 inputs (the ONNX convention, and what
tokenizers return as numpy arrays) and returns ``start_logits`` then ``end_logits``, so
``start, end = session.run(None, feeds)`` holds what it says.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.libraries.extras import require
from qa_finetune.modeling.cpu_threads import threads_per_pass
from qa_finetune.modeling.formats.base import OUTPUT_NAMES, ExportFormat, input_names

if TYPE_CHECKING:
    import numpy as np

OPSET = 17
ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"


def model_file(folder: Path, quantized: bool = False) -> Path:
    """The model ONNX Runtime runs from ``folder``."""
    return Path(folder) / (INT8_FILE if quantized else ONNX_FILE)


def _erfc_handler(ctx: Any, node: Any, name: str, args: Any) -> None:
    """Rewrite ``Erfc(x)`` as ``Sub(1, Erf(x))`` in the ONNX graph."""
    import numpy as np
    from tf2onnx import utils

    x = node.input[0]
    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(x))
    outputs, shapes, dtypes = node.output, [ctx.get_shape(x)], [ctx.get_dtype(x)]
    ctx.remove_node(node.name)
    erf = ctx.make_node("Erf", [x], op_name_scope=name, shapes=shapes, dtypes=dtypes)
    one = ctx.make_const(utils.make_name(f"{name}_one"), np.array(1, dtype=dtype))
    ctx.make_node(
        "Sub", [one.output[0], erf.output[0]], outputs=outputs, shapes=shapes, dtypes=dtypes
    )


def _name_dynamic_axes(model: Any) -> None:
    """Call the two free axes of every input and output ``batch`` and ``sequence``."""
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        for dim, name in zip(dims, ("batch", "sequence"), strict=False):
            if not dim.HasField("dim_value"):
                dim.dim_param = name


def _order_outputs(model: Any) -> None:
    """List the graph's outputs in ``OUTPUT_NAMES`` order (tf2onnx sorts a dict's keys,
    which puts ``end_logits`` first)."""
    import onnx

    ordered = []
    for value in sorted(model.graph.output, key=lambda v: OUTPUT_NAMES.index(v.name)):
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(value)
        ordered.append(copy)
    del model.graph.output[:]
    model.graph.output.extend(ordered)


def convert(forward: Any, signature: list[Any], target: Path) -> Path:
    """Convert a ``tf.function`` over named [None, None] integer inputs to ``target``."""
    onnx = require("onnx", "onnx", "--format onnx")
    tf2onnx = require("tf2onnx", "onnx", "--format onnx")
    from qa_finetune.libraries.compat import tf2onnx_passes_free_their_copies

    try:
        with tf2onnx_passes_free_their_copies():
            model, _ = tf2onnx.convert.from_function(
                forward,
                input_signature=signature,
                opset=OPSET,
                custom_op_handlers={"Erfc": (_erfc_handler, [])},
            )
    except Exception as exc:  # tf2onnx raises bare Exceptions for ops it cannot map
        raise QAFinetuneError(
            f"tf2onnx cannot convert this model ({type(exc).__name__}: {exc})".split("\n")[0]
            + "; export it with --format savedmodel instead"
        ) from exc
    _name_dynamic_axes(model)
    _order_outputs(model)
    onnx.save(model, str(target))
    return target


def quantize_int8(source: Path, target: Path) -> Path:
    """Dynamic int8 quantisation of the weights, per output channel (activations are
    quantised on the fly, per batch)."""
    import logging

    quantization = require("onnxruntime.quantization", "onnx", "--quantize int8")
    root = logging.getLogger()
    level = root.level
    # It logs a generic "consider pre-processing" warning on the root logger for every model.
    root.setLevel(logging.ERROR)
    try:
        # One scale per output channel, 7-bit weight range: on a trained MiniLM per-tensor scales
        # cost 3.7 F1 on 1,000 SQuAD v1.1 dev questions, these 0.24, at the same speed
        # (bench/reports/08-exports.md).
        quantization.quantize_dynamic(
            str(source),
            str(target),
            weight_type=quantization.QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
        )
    finally:
        root.setLevel(level)
    return target


def write(model: Any, tokenizer: Any, staging: Path, quantize: str | None = None) -> list[str]:
    """``model.onnx`` of the model's forward, and its int8 copy when asked."""
    from qa_finetune.modeling.formats.savedmodel import serving_function

    serve, signature = serving_function(model, input_names(tokenizer), "int64")
    files = [convert(serve, signature, model_file(staging)).name]
    if quantize == "int8":
        files.append(quantize_int8(model_file(staging), model_file(staging, True)).name)
    return files


def session_options(ort: Any, threads: int | None = None) -> Any:
    """Session options for answering on a CPU shared with other work.

    Idle pool threads do not spin waiting for the next operator: on a CPU shared with the
    server's tokenizing threads or another process, spinning takes the very cores the pass
    needs (bench/studies/onnx_session.py: 435 -> 322 ms per window on a loaded 2-core AMD EPYC).
    """
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or threads_per_pass()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


# ONNX Runtime's names of the integer input types -> numpy's.
_INTEGER_TYPES = {"tensor(int32)": "int32", "tensor(int64)": "int64"}


class OnnxPredictor:
    """An ONNX Runtime session over an exported QA model."""

    backend = "onnx"
    # ONNX Runtime's ``InferenceSession.run`` may be called from several threads at once:
    # ``predict_features`` runs passes side by side, each on the session's threads (the
    # share of the cores read when the session was opened).
    concurrent_calls = True

    def __init__(self, session: Any, path: Path) -> None:
        self.session = session
        self.path = path
        self.input_names = tuple(i.name for i in session.get_inputs())
        # int64 since inputs follow the ONNX convention; exports made before take int32.
        self.input_types = {
            i.name: _INTEGER_TYPES.get(i.type, "int64") for i in session.get_inputs()
        }
        outputs = [o.name for o in session.get_outputs()]
        if sorted(outputs) != sorted(OUTPUT_NAMES):
            raise QAFinetuneError(
                f"{path} returns {outputs}, not start_logits and end_logits: export it with "
                "`qa-finetune export --model RUN --format onnx`"
            )

    @classmethod
    def load(cls, path: Path, threads: int | None = None) -> OnnxPredictor:
        """Open ``path``; a missing extra or an unreadable file is a one-line error."""
        ort = require("onnxruntime", "onnx", "the ONNX backend", fix="pass --backend tf")
        options = session_options(ort, threads)
        try:
            session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf types
            detail = str(exc).split("\n")[0][:200]
            raise QAFinetuneError(
                f"{path} is not a readable ONNX model ({detail}): export it again with "
                "`qa-finetune export --model RUN --format onnx`"
            ) from exc
        return cls(session, Path(path))

    def predict_batch(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits for integer inputs, cast to the type the graph declares; an
        input the model takes but the batch lacks (``token_type_ids``) is zeros."""
        import numpy as np

        ids = batch["input_ids"]
        feed = {
            name: (batch[name] if name in batch else np.zeros_like(ids)).astype(
                self.input_types[name], copy=False
            )
            for name in self.input_names
        }
        start, end = self.session.run(list(OUTPUT_NAMES), feed)
        return start, end


def load_predictor(folder: Path, quantized: bool = False) -> OnnxPredictor:
    """The ONNX Runtime predictor of an export folder."""
    return OnnxPredictor.load(model_file(folder, quantized))


def card_note(folder: Path) -> str:
    """What the card says about an uploaded ``onnx/`` folder."""
    int8 = " and `model.int8.onnx` (int8 weights)" if model_file(folder, True).is_file() else ""
    return (
        f"`onnx/` holds `model.onnx` (opset 17, dynamic batch and length){int8}, the "
        "tokenizer and `qa_config.json` (window, stride and decoding settings, special-token "
        "positions): `qa-finetune ask` runs it with ONNX Runtime, without TensorFlow, when "
        "given the downloaded `onnx/` folder as `--model`."
    )


FORMAT = ExportFormat(
    name="onnx",
    help="onnx",
    write=write,
    quantizations=("int8",),
    requires=("tf2onnx", "onnxruntime"),
    extra="onnx",
    backend="onnx",
    model_file=model_file,
    load_predictor=load_predictor,
    card_note=card_note,
)
