"""What the Hub accepts as a repository id, for models, datasets and push targets."""

from __future__ import annotations

import pytest

from qa_finetune.config.hub_ids import is_hub_id


@pytest.mark.parametrize(
    ("text", "anywhere", "as_push_target"),
    [
        ("distilroberta-base", True, False),
        ("deepset/roberta-base-squad2", True, True),
        ("user_1/model.v2", True, True),
        ("user/model_", True, True),
        ("/abs/path", False, False),
        ("a/b/c", False, False),
        ("user/-model", False, False),
        ("user/model-", False, False),
        ("user/mo--del", False, False),
        ("user/mo..del", False, False),
        ("user/" + "m" * 97, False, False),
        # 200 characters: no part may pass the Hub's 96 (a namespace neither).
        ("n" * 103 + "/" + "m" * 96, False, False),
        ("n" * 96 + "/" + "m" * 96, True, True),
        ("user/model.git", False, False),
        ("", False, False),
    ],
)
def test_hub_ids(text: str, anywhere: bool, as_push_target: bool) -> None:
    assert is_hub_id(text) is anywhere
    assert is_hub_id(text, namespace_required=True) is as_push_target
