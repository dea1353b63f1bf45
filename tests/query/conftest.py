"""The sweep store (``tests/support/sweep.py``) the read API's tests read, on each backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tbconvert
from tbconvert.query.store import Store
from tests.support.snapshots import StoreFactory
from tests.support.sweep import build_store


@pytest.fixture(scope="module")
def store_path(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    make_store: StoreFactory,
) -> str:
    """A store built once per test module: sample_logdirs and the sweep."""
    return build_store(tmp_path_factory.mktemp(request.module.__name__.rsplit(".")[-1]), make_store)


@pytest.fixture
def store(store_path: str) -> Iterator[Store]:
    """The module's store, open for reading."""
    with tbconvert.open_store(store_path) as opened:
        yield opened
