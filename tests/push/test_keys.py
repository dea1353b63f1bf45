"""The rule from (context, tag) to an MLflow key: injective, invertible, and every key one
MLflow's own validator accepts (docs/cli.md, "Pushing to MLflow")."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mlflow.exceptions import MlflowException
from mlflow.utils.validation import _validate_metric_name, _validate_param_name

from tbconvert.push.keys import MAX_KEY_LENGTH, decode_key, encode_name, metric_key, param_keys

# Names made of the characters that need care: the kept ones, the separator's, escapes'.
names = st.text(alphabet=st.sampled_from("a/. -_ü:%0f"), max_size=12) | st.text(max_size=8)


@pytest.mark.parametrize(
    ("context", "tag", "key"),
    [
        ("", "loss", "loss"),
        ("", "train/loss", "train/loss"),
        ("train", "loss", "train / loss"),
        ("", "lr=0.1", "lr 3d 0.1"),
        ("", "my loss", "my 20 loss"),
        ("", "", " "),
        ("eval", "", "eval /  "),
        ("", ".hidden", " 2e hidden"),
        ("", "a/./b", "a/ 2e /b"),
        ("", "/a//b/", " 2f a 2f  2f b 2f "),
        ("ü", "x", " fc  / x"),
    ],
)
def test_the_documented_examples(context: str, tag: str, key: str) -> None:
    assert metric_key(context, tag) == key
    assert decode_key(key) == (context, tag)


@given(names, names, names, names)
@example("", "a/b", "a", "b")
@example("a", " 2f ", "a 2f", "")
def test_two_series_never_share_a_key(
    context: str, tag: str, other_context: str, other_tag: str
) -> None:
    if (context, tag) != (other_context, other_tag):
        assert metric_key(context, tag) != metric_key(other_context, other_tag)


@given(names, names)
def test_a_key_gives_back_its_context_and_tag(context: str, tag: str) -> None:
    assert decode_key(metric_key(context, tag)) == (context, tag)


@given(st.text(max_size=300), st.text(max_size=300))
@example("", "x" * 300)
@example("c" * 130, "t" * 130)
def test_every_key_is_one_mlflow_takes(context: str, tag: str) -> None:
    key = metric_key(context, tag)
    assert len(key) <= MAX_KEY_LENGTH
    _validate_metric_name(key)
    _validate_param_name(key)


@given(st.text(alphabet="ab/", max_size=6))
def test_names_mlflow_takes_as_they_are_mostly_stay_so(name: str) -> None:
    key = encode_name(name)
    try:
        _validate_metric_name(name)
    except MlflowException:
        return
    assert key == name or name == ""


def test_params_agreed_on_by_every_session_keep_their_name() -> None:
    sessions = {"s1": {"lr": "0.1", "opt": "sgd"}, "s2": {"lr": "0.1", "opt": "adam"}}
    assert param_keys(sessions) == {"lr": "0.1", "s1 / opt": "sgd", "s2 / opt": "adam"}
    assert param_keys({"": {"lr": "0.1"}}) == {"lr": "0.1"}


def test_text_the_rule_never_makes_is_not_decoded() -> None:
    for key in ("a  b", "a 2f", "a zz b", "x /  / y", "ab%"):
        assert decode_key(key) is None
