"""``plot``, ``report`` and ``export`` read everything a command needs through one connection:
one snapshot of the store, however many series they draw or write."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import event

import tbconvert
from tbconvert.output.export import export
from tbconvert.output.plot import plot
from tbconvert.output.report import report
from tbconvert.query.groups import Grouping
from tbconvert.query.store import Store
from tests.support.snapshots import StoreFactory
from tests.support.sweep import build_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_store(tmp_path_factory.mktemp("snapshot"), StoreFactory("sqlite", None))


@contextmanager
def counted(store: Store) -> Iterator[list[object]]:
    """The connections taken from the store's pool while the block runs."""
    taken: list[object] = []

    def checkout(connection: object, *_: object) -> None:
        taken.append(connection)

    event.listen(store.engine, "checkout", checkout)
    try:
        yield taken
    finally:
        event.remove(store.engine, "checkout", checkout)


@pytest.mark.parametrize("resumed", ["current", "all"])
@pytest.mark.parametrize("grouping", [None, Grouping(("lr",))])
def test_plot_reads_every_curve_in_one_snapshot(
    store_path: str, tmp_path: Path, resumed: str, grouping: Grouping | None
) -> None:
    with tbconvert.open_store(store_path) as opened, counted(opened) as taken:
        drawn = plot(
            opened, str(tmp_path / "all.png"), run="sweep/*", grouping=grouping, resumed=resumed
        )
    assert drawn.lines >= 2 and len(taken) == 1


def test_report_reads_in_one_snapshot(store_path: str, tmp_path: Path) -> None:
    with tbconvert.open_store(store_path) as opened, counted(opened) as taken:
        shown = report(opened, str(tmp_path / "report.html"))
    assert shown["charts"] and shown["images"] and shown["texts"] and len(taken) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"kind": "scalars", "resumed": "current"},
        {"kind": "scalars", "wide": True},
        {"kind": "scalars", "grouping": Grouping(("lr",))},
        {"kind": "hparams", "metrics": ["loss"]},
    ],
)
def test_export_reads_in_one_snapshot(
    store_path: str, tmp_path: Path, options: dict[str, object]
) -> None:
    with tbconvert.open_store(store_path) as opened, counted(opened) as taken:
        written = export(opened, output=str(tmp_path / "out.jsonl"), **options)  # type: ignore[arg-type]
    assert written and len(taken) == 1
