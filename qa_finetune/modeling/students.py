"""A student made of a teacher's layers: the teacher's architecture with only some of its
encoder layers, started from the teacher's weights (embeddings, the chosen layers in order,
the QA head).

The student is an ordinary transformers model with fewer layers (its ``config.json`` says
how many), so everything that loads a model loads it. Families whose TF weights name their
encoder layers ``.../layer_._N/...`` are supported (``families.Family.layer_subsets``: BERT
and MiniLM, RoBERTa, DistilBERT's ``transformer.layer``, ELECTRA, XLNet).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.families import LAYER_PART, layered_family_names, layered_model
from qa_finetune.modeling.loading import float32_head

# One encoder layer's part of a weight name, with its index.
_LAYER = re.compile(LAYER_PART)


def teacher_layers(model_dir: Path) -> int:
    """How many encoder layers the model in ``model_dir`` has, from its ``config.json``; a
    family without layers to choose is refused."""
    values, model_type, family = layered_model(model_dir)
    if family is None:
        raise QAFinetuneError(
            f"train.student_layers: a {model_type} teacher has no encoder layers to choose "
            f"from; use a teacher of another family ({layered_family_names()}), or drop "
            "train.student_layers"
        )
    count = values.get(family.shape_keys[0])
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise QAFinetuneError(f"{model_dir}/config.json gives no layer count: is it a model?")
    return count


def chosen_layers(spec: int | Sequence[int], count: int) -> list[int]:
    """The teacher's layers ``train.student_layers`` keeps (a number N: the first N), each
    checked to exist among its ``count`` layers."""
    layers = list(range(spec)) if isinstance(spec, int) else [int(i) for i in spec]
    missing = [i for i in layers if not 0 <= i < count]
    if missing:
        raise QAFinetuneError(
            f"train.student_layers {spec} names layer {missing[0]} (counted from 0), but the "
            f"teacher has {count} encoder layers: choose among 0 to {count - 1}"
        )
    return layers


def _own_name(weight: Any) -> str:
    """A weight's name inside its model (the model's own scope, numbered per instance, cut)."""
    return weight.name.split("/", 1)[-1]


def student_from_layers(teacher: Any, layers: Sequence[int]) -> Any:
    """A model of ``teacher``'s class with only its encoder layers ``layers``: student layer
    ``i`` is a copy of teacher layer ``layers[i]``; the embeddings and the QA head are
    copies of the teacher's. Built under the current Keras policy (and strategy scope)."""
    config = copy.deepcopy(teacher.config)
    # Each family's own key (n_layers, n_layer) is set through its config's attribute map.
    config.num_hidden_layers = len(layers)
    student = type(teacher)(config)
    student(student.dummy_inputs, training=False)
    source = {_own_name(weight): weight for weight in teacher.weights}
    for weight in student.weights:
        name = _own_name(weight)
        found = _LAYER.search(name)
        if found:
            name = f"{name[: found.start()]}/layer_._{layers[int(found[1])]}/{name[found.end() :]}"
        if name not in source:
            raise QAFinetuneError(
                f"the teacher has no weight {name} for the student's {_own_name(weight)}: "
                "its architecture does not support train.student_layers"
            )
        weight.assign(source[name].numpy())
    return float32_head(student)
