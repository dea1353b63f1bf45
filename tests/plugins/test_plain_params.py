"""A sidecar's values typed as written (``plugins.hparams.plain_rows``): read back through the
read API's ``typed_param``, every value is the one YAML or JSON parsing gave, with its types
all the way down; the text of a list or mapping is the JSON of it."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from tbconvert.plugins.hparams import plain_rows
from tbconvert.query.results import typed_param
from tests.support.lightning_params import same

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=8), _VALUES, max_size=6))
@example({"InputCh": [0], "shape": [65, 384, 384], "scale": [1.0], "norm": None, "big": 2**70})
@example({"flag": True, "one": 1, "one_float": 1.0, "huge": 10**400})
def test_values_read_back_as_written(values: dict[str, Any]) -> None:
    found = plain_rows(values)
    assert [row[0] for row in found] == sorted(values)
    for key, value, value_num, value_type in found:
        assert same(typed_param(value, value_num, value_type), values[key])
        if value_type == "json":
            assert same(json.loads(value), values[key])


def test_a_number_that_is_not_finite_is_text_json_can_hold() -> None:
    ((_, top, top_num, top_type), (_, listed, _, _)) = plain_rows(
        {"a": math.inf, "b": [math.nan, -math.inf]}
    )
    assert (top, top_num, top_type) == ("inf", math.inf, "number")
    assert json.loads(listed) == ["NaN", "-Infinity"]
