"""A conversion's options (``tbconvert.conversion.options``): built once, from the command line's
flags or from :func:`tbconvert.convert`'s keywords, and checked as they are built, before any
work; speed thresholds travel in frozen tuning values, never in module constants."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tbconvert import convert, watch
from tbconvert.conversion.options import (
    BY_RECORD_BYTES_VARIABLE,
    ConvertOptions,
    ConvertTuning,
    read_tuning_from_environment,
)
from tbconvert.errors import UsageError
from tbconvert.filters import Selection
from tbconvert.reading.tuning import BY_RECORD_BYTES, ReadTuning
from tests.support.eventfiles import scalar_events, write_events


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1])
def test_a_max_record_size_under_a_megabyte_is_refused_before_any_work(
    tmp_path: Path, size: int
) -> None:
    # The logdir does not exist: the options are refused before anyone looks for it.
    with pytest.raises(UsageError, match=f"--max-record-size is {size} bytes"):
        convert(tmp_path / "missing", tmp_path / "s.db", max_record_size=size)
    with pytest.raises(UsageError, match="--max-record-size"):
        ConvertOptions(max_record_size=size)
    assert not (tmp_path / "s.db").exists()
    assert ConvertOptions(max_record_size=1 << 20).max_record_size == 1 << 20


def test_an_empty_source_name_is_refused_however_the_options_are_made(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="source name is empty"):
        ConvertOptions(source="  ")
    with pytest.raises(UsageError, match="source name is empty"):
        ConvertOptions().with_keywords(source="")
    with pytest.raises(UsageError, match="source name is empty"):
        watch(tmp_path / "missing", tmp_path / "s.db", passes=1, source=" ")


def test_keywords_apply_over_the_options_given() -> None:
    base = ConvertOptions(flat=True, selection=Selection(tags=("loss",)), jobs=2)
    options = base.with_keywords(
        plugins=["scalars"], exclude_tags=["x*"], runs=["a*"], storage_options=None, notify=None
    )
    assert options.flat and options.jobs == 2
    assert options.selection == Selection(
        plugins=frozenset({"scalars"}), tags=("loss",), exclude_tags=("x*",)
    )
    assert options.runs == ("a*",) and dict(options.storage_options) == {}
    assert options.notify("a line") is None
    assert base.with_keywords() == base
    assert base.with_keywords(plugins=None).selection.plugins is None


def test_a_keyword_convert_does_not_take_is_a_type_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'chunk_size'"):
        convert(tmp_path, tmp_path / "s.db", chunk_size=10)
    with pytest.raises(TypeError, match="'selection'"):
        ConvertOptions().with_keywords(selection=Selection())


def test_options_and_keywords_convert_alike(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    for run in ("a", "b"):
        write_events(logdir / run / "events.out.tfevents.1.h", scalar_events("loss", range(5)))
    by_keywords = convert(logdir, tmp_path / "k.db", runs=["a"], progress=False)
    options = ConvertOptions(runs=("a",), progress=False)
    by_options = convert(logdir, tmp_path / "o.db", options)
    assert by_keywords.points == by_options.points == {"scalars": 5}
    assert by_keywords.runs == by_options.runs == 1


def test_tuning_values_are_frozen_and_picklable_for_workers() -> None:
    import pickle

    tuning = ConvertTuning(read=ReadTuning(by_record_bytes=0), parcel_chunks=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tuning.read.by_record_bytes = 1  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(tuning)) == tuning
    settings = ConvertOptions(tuning=tuning).read_settings()
    assert settings.tuning is tuning.read


def test_the_by_record_knob_is_read_when_tuning_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BY_RECORD_BYTES_VARIABLE, raising=False)
    assert read_tuning_from_environment() == ReadTuning()
    assert ConvertTuning().read.by_record_bytes == BY_RECORD_BYTES
    monkeypatch.setenv(BY_RECORD_BYTES_VARIABLE, "123")
    assert ConvertOptions().tuning.read == ReadTuning(by_record_bytes=123)
    monkeypatch.setenv(BY_RECORD_BYTES_VARIABLE, "lots")
    with pytest.raises(UsageError, match=BY_RECORD_BYTES_VARIABLE):
        ConvertTuning()
