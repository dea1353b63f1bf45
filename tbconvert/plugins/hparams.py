"""HParams: ``HParamsPluginData`` carried in a value's metadata (reference §2.5, design §5).

All three records live in ``metadata.plugin_data.content``; the value itself carries nothing
(torch, tensorboardX: metadata only) or the empty "NULL tensor" (TF2, DT_FLOAT shape [0]).
Which record it is follows from the oneof that is set, never from the tag.

* ``session_start_info`` -> table **params**, one row per entry of its ``hparams`` map, sorted
  by key, typed so SQL clients can filter and compare without parsing:

  ========== ========================================== ============= ==========
  Value kind ``value`` (text)                           ``value_num`` value_type
  ========== ========================================== ============= ==========
  number     ``repr(float)``: shortest exact text, e.g. the float     ``number``
             ``0.1``, ``32.0``, ``nan``, ``inf``        (NaN: NULL)
  integer    decimal text, e.g. ``0``, ``-3``           the float     ``integer``
             (sidecars only: a session's numbers are    (NULL beyond
             doubles)                                   a double)
  string     the string                                 NULL          ``string``
  bool       ``true`` / ``false``                       1.0 / 0.0     ``bool``
  other      compact JSON (null, list, struct; keys     NULL          ``json``
             sorted; integers stay integers, ``[0]``
             vs ``[0.0]``; non-finite numbers as the
             proto3 JSON strings ``"NaN"``, ``"Infinity"``)
  ========== ========================================== ============= ==========

  Types are kept as written: torch writes bools as numbers 1.0/0.0, tensorboardX as bools;
  this module does not guess.  :func:`plain_rows` types the values a sidecar (YAML, JSON)
  holds by the same table, keeping the integers protobuf's ``Value`` cannot (design §6).
  ``params`` holds the hparams map and nothing else, because a reserved key
  (``__group_name__``) would collide with, and be mistaken for, a user's hparam.
  ``group_name`` and ``start_time_secs`` are not lost: the record's exact content bytes are the
  tag's ``series.plugin_content``, which is exact whenever a (run, context) holds one session,
  as every writer lays it out (torch/tensorboardX: one sub-directory per ``add_hparams``;
  TF2: one trial directory per session).  Keeping each record's bytes as well would need a
  value to give rows to two tables, which :class:`Decoded` cannot express today.

* ``experiment`` (domains, metric names) and ``session_end_info`` (status, end time) ->
  table **tensors**: the content bytes unchanged, dtype ``hparams_plugin_data``, shape ``[]``.
  ``HParamsPluginData.FromString`` on ``v_tensors.data`` gives back the record as written.

Unparseable content, content with no record set, and a value that carries a non-empty tensor
(no writer does; it would be lost here) raise :class:`DecodeFailure`, so the caller keeps the
value raw and counts it undecodable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from tbconvert.plugins.base import Decoded, DecodeFailure
from tbconvert.plugins.tensors import raw_bytes

TABLE = "params"
RAW_DTYPE = "hparams_plugin_data"
# TensorProto fields that describe a tensor without holding any element.
_TENSOR_HEADER_FIELDS = frozenset({"dtype", "tensor_shape", "version_number"})
Row = tuple[str, "str | None", "float | None", str]


def decode(value: Any, metadata: Any) -> Decoded:
    """Decode one hparams value into params rows or a raw tensors row.

    Args:
        value: A ``Summary.Value`` (metadata only, or holding the NULL tensor).
        metadata: Its ``SummaryMetadata`` (its own, else the tag's first in the file).

    Returns:
        ``params`` rows ``(key, value, value_num, value_type)`` for a ``session_start_info``;
        one ``tensors`` row with the unchanged content bytes for the other records.

    Raises:
        DecodeFailure: no metadata, unparseable content, no record in it, or a value that
            carries tensor data.
    """
    if metadata is None:
        raise DecodeFailure("hparams value without metadata")
    if value.WhichOneof("value") == "tensor" and _has_elements(value.tensor):
        raise DecodeFailure("hparams value carries tensor data")
    content = bytes(metadata.plugin_data.content)
    try:
        data = HParamsPluginData.FromString(content)
    except DecodeError as error:
        raise DecodeFailure(f"unparseable HParamsPluginData: {error}") from error
    kind = data.WhichOneof("data")
    if kind == "session_start_info":
        return Decoded(TABLE, params_rows(data.session_start_info.hparams))
    if kind is None:
        raise DecodeFailure("HParamsPluginData holds no experiment or session record")
    return raw_bytes(content, RAW_DTYPE)


def params_rows(hparams: Any) -> list[Row]:
    """Typed rows of an hparams map (``map<string, google.protobuf.Value>``).

    Args:
        hparams: ``SessionStartInfo.hparams``.

    Returns:
        ``(key, value, value_num, value_type)`` tuples sorted by key.
    """
    return [(key, *_typed(hparams[key])) for key in sorted(hparams)]


def _typed(value: Any) -> tuple[str | None, float | None, str]:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = float(value.number_value)
        return repr(number), number, "number"
    if kind == "string_value":
        return str(value.string_value), None, "string"
    if kind == "bool_value":
        flag = bool(value.bool_value)
        return ("true" if flag else "false"), float(flag), "bool"
    return json_text(_json_object(value)), None, "json"


def plain_rows(values: Mapping[str, Any]) -> list[Row]:
    """Typed rows of plain Python values, as YAML or JSON parsing gives them.

    Args:
        values: Keys to ``None``, bools, ints, floats, strings, lists and mappings of them.

    Returns:
        ``(key, value, value_num, value_type)`` tuples sorted by key, typed as
        :func:`params_rows` types a session's, integers kept as ``integer``.
    """
    return [(key, *_plain_typed(values[key])) for key in sorted(values)]


def _plain_typed(value: Any) -> tuple[str | None, float | None, str]:
    if isinstance(value, bool):  # before int: a bool is an int to Python
        return ("true" if value else "false"), float(value), "bool"
    if isinstance(value, int):
        try:
            number: float | None = float(value)
        except OverflowError:  # beyond a double: the text alone is exact
            number = None
        return str(value), number, "integer"
    if isinstance(value, float):
        return repr(value), value, "number"
    if isinstance(value, str):
        return value, None, "string"
    return json_text(_plain_json(value)), None, "json"


def _plain_json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (list, tuple)):
        return [_plain_json(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain_json(item) for key, item in value.items()}
    return value


def json_text(value: Any) -> str:
    """Compact JSON with sorted keys: one text per value, whatever order it was built in."""
    return json.dumps(
        value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
    )


def _json_object(value: Any) -> Any:
    """A ``google.protobuf.Value`` as a JSON-ready object, NaN and infinities included
    (``json_format`` refuses them inside lists and structs)."""
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = float(value.number_value)
        if math.isfinite(number):
            return number
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    if kind == "string_value":
        return str(value.string_value)
    if kind == "bool_value":
        return bool(value.bool_value)
    if kind == "list_value":
        return [_json_object(item) for item in value.list_value.values]
    if kind == "struct_value":
        fields = value.struct_value.fields
        return {key: _json_object(fields[key]) for key in fields}
    return None  # null_value, or no kind set


def _has_elements(tensor: Any) -> bool:
    return any(field.name not in _TENSOR_HEADER_FIELDS for field, _ in tensor.ListFields())
