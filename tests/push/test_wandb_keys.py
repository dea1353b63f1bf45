"""The rule from (context, tag) to a W&B key, ``CONTEXT/TAG``: injective, invertible, and no
series key is a step key or one of W&B's own (docs/cli.md, "Pushing to W&B")."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tbconvert.push.wandb_keys import config_keys, decode_key, step_key, wandb_key

names = st.text(alphabet=st.sampled_from("a/._@%2F5 ürun"), max_size=10) | st.text(max_size=8)


@pytest.mark.parametrize(
    ("context", "tag", "key"),
    [
        ("", "loss", "run/loss"),
        ("", "Loss/train", "run/Loss/train"),
        ("train", "loss", "train/loss"),
        ("eval/cifar", "acc", "eval%2Fcifar/acc"),
        ("run", "loss", "%72un/loss"),
        ("_step", "x", "%5Fstep/x"),
        ("", "loss@step", "run/loss%40step"),
        ("", "acc.top1", "run/acc%2Etop1"),
        ("", "50%", "run/50%25"),
        ("", "", "run/"),
    ],
)
def test_the_documented_examples(context: str, tag: str, key: str) -> None:
    assert wandb_key(context, tag) == key
    assert decode_key(key) == (context, tag)


@given(names, names, names, names)
@example("", "a/b", "a", "b")
@example("a/b", "c", "a", "b/c")
@example("", "x", "run", "x")
@example("", "x@step", "", "x")
def test_two_series_never_share_a_key_nor_a_step_key(
    context: str, tag: str, other_context: str, other_tag: str
) -> None:
    key = wandb_key(context, tag)
    assert decode_key(key) == (context, tag)
    assert not key.startswith("_") and "." not in key
    other = wandb_key(other_context, other_tag)
    assert (key == other) == ((context, tag) == (other_context, other_tag))
    assert step_key(key) != other


def test_params_the_sessions_agree_on_keep_their_names() -> None:
    sessions = {"": {"lr": 0.1, "opt": "sgd"}, "eval": {"lr": 0.1, "opt": "adam"}}
    assert config_keys(sessions) == {"lr": 0.1, "opt": {"run": "sgd", "eval": "adam"}}
