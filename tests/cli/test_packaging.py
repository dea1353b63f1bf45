"""The wheel carries the Alembic migrations, so an installed converter can create stores."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contains_migrations(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
    )
    (wheel,) = tmp_path.glob("tbconvert-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "tbconvert/_migrations/env.py" in names
    assert "tbconvert/_migrations/script.py.mako" in names
    # What a fresh SQLite store replays instead of running the migrations (store.migrate).
    assert "tbconvert/store/sqlite_schema.sql" in names
    revisions = {
        ROOT / "migrations" / "versions" / path.name
        for path in (ROOT / "migrations" / "versions").glob("*.py")
    }
    for revision in revisions:
        assert f"tbconvert/_migrations/versions/{revision.name}" in names
    assert not any("__pycache__" in name for name in names)
    # The viewer's plotly.js, fetched by hatch_build.py (not in git).
    bundle = "tbconvert/output/viewer/static/vendor/plotly-cartesian.min.js"
    assert bundle in names
    assert b"plotly.js (cartesian - minified) v4.1.1" in zipfile.ZipFile(wheel).read(bundle)[:200]
    # Every module of every sub-package, as the checkout lays them out.
    modules = sorted((ROOT / "tbconvert").rglob("*.py"))
    assert len(modules) > 80
    for module in modules:
        assert module.relative_to(ROOT).as_posix() in names
