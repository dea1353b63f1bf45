"""Every optional extra, when a command needs it and it is missing, is named in one line with
the install command that works from a checkout, in one form (SPEC §2): ``pip install '.[X]'``.

The package an extra brings is hidden (``None`` in ``sys.modules`` makes importing it fail as
a missing package does); the extras come from pyproject.toml, so a new extra without a case
here fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tbconvert import open_store
from tbconvert.cli import cli
from tbconvert.errors import MissingDependency
from tests.support.eventfiles import write_tbx_run

ROOT = Path(__file__).resolve().parents[2]
# Extras that only gather others, and the developers' groups.
NOT_A_FEATURE = {"all", "remote", "mutate", "lint", "test"}
# extra -> (the module it brings, the arguments of a command that needs it; STORE is the
# converted store, OUT a directory to write into).
CASES = {
    "postgres": ("psycopg", ["runs", "--store", "postgresql://me@127.0.0.1:1/db"]),
    "plot": ("matplotlib", ["plot", "--store", "STORE", "--tag", "loss", "-o", "OUT/c.png"]),
    "parquet": ("pyarrow", ["export", "scalars", "--store", "STORE", "-o", "OUT/s.parquet"]),
    "serve": ("datasette", ["serve", "--store", "STORE"]),
    "ui": ("plotly", ["publish", "--store", "STORE", "-o", "OUT/site"]),
    "s3": ("s3fs", ["tf", "--logdir", "s3://bucket/logs", "--store", "OUT/s.db"]),
    "gcs": ("gcsfs", ["tf", "--logdir", "gs://bucket/logs", "--store", "OUT/s.db"]),
    "azure": ("adlfs", ["tf", "--logdir", "az://container/logs", "--store", "OUT/s.db"]),
    "hf": ("huggingface_hub", ["tf", "--logdir", "hf://datasets/me/logs", "--store", "OUT/s.db"]),
    "mlflow": ("mlflow", ["push", "mlflow", "--store", "STORE", "--tracking-uri", "file:OUT/m"]),
    "mcp": ("mcp", ["mcp", "--store", "STORE"]),
    "aim": ("aim", ["push", "aim", "--store", "STORE", "--repo", "OUT/aim"]),
    "wandb": ("wandb", ["push", "wandb", "--store", "STORE", "--project", "p", "--offline", "OUT"]),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("hints")
    write_tbx_run(root / "logs", "run_a")
    path = str(root / "s.db")
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(root / "logs"), "--store", path])
    assert result.exit_code == 0, result.stderr
    return path


def hide(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``package`` and its submodules fail to import, as when it is not installed (an
    earlier test may have imported ``datasette.app``, which ``None`` for ``datasette`` alone
    would not hide)."""
    for name in [name for name in sys.modules if name.split(".")[0] == package]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, package, None)
    # fsspec keeps the class of a protocol an earlier test used (an S3 logdir, a dataset in
    # S3): forget it too, or the command finds the file system without importing the package.
    import fsspec  # noqa: F401  (loads fsspec.registry, whose name fsspec's package shadows)

    # fsspec's private table, not ours: fsspec has no public way to unregister.
    registered = sys.modules["fsspec.registry"]._registry
    for protocol, implementation in list(registered.items()):
        if implementation.__module__.split(".")[0] == package:
            monkeypatch.delitem(registered, protocol)


def test_every_extra_has_a_case() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(ROOT / "pyproject.toml", "rb") as handle:
        extras = set(tomllib.load(handle)["project"]["optional-dependencies"])
    # pandas serves the Python API only (Store.to_pandas): the last test but one.
    assert {*CASES, "pandas"} == extras - NOT_A_FEATURE


@pytest.mark.parametrize("extra", sorted(CASES))
def test_a_missing_extra_is_named_in_one_line_with_the_checkout_command(
    extra: str, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, arguments = CASES[extra]
    hide(module, monkeypatch)
    arguments = [
        argument.replace("STORE", store).replace("OUT", str(tmp_path)) for argument in arguments
    ]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert f"the {extra} extra" in line and f"pip install '.[{extra}]'" in line, line
    assert "tbconvert[" not in line and list(tmp_path.iterdir()) == []


def test_the_python_api_gives_the_same_hint(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hide("pandas", monkeypatch)
    with open_store(store) as opened, pytest.raises(MissingDependency) as error:
        opened.to_pandas("scalars")
    assert "the pandas extra: pip install '.[pandas]'" in str(error.value)


def test_no_message_names_a_package_index_install() -> None:
    """tbconvert is on no index: ``pip install tbconvert[...]`` cannot work."""
    for path in (ROOT / "tbconvert").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "tbconvert[" not in text and "install -U tbconvert" not in text, path


@pytest.mark.parametrize(
    "url", ["mysql://me:secret@db/runs", "mysql+pymysql://me@db/runs", "mssql+pyodbc://db/runs"]
)
@pytest.mark.parametrize("command", [["runs"], ["tf", "--logdir", "."]], ids=["runs", "tf"])
def test_a_store_of_another_database_says_which_are_supported(url: str, command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--store", url])
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert "SQLite or PostgreSQL, not m" in line and "extra" not in line, line
    assert "secret" not in line and url.split(":")[0].split("+")[0] in line
