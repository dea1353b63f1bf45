"""The plotly.js the viewer loads: the cartesian bundle ``hatch_build.py`` pins and fetches
from the npm registry when the build could, else the full one of the ``plotly`` wheel; the
hook takes only the tarball of the pinned integrity."""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import tarfile
from pathlib import Path

import pytest

from tbconvert.output.viewer import app

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import hatch_build  # noqa: E402


def test_the_page_loads_the_pinned_cartesian_bundle() -> None:
    # The install the tests run in was built by the hook, with the registry reachable.
    head = app.plotly_js().read_bytes()[:200]
    assert f"plotly.js (cartesian - minified) v{hatch_build.VERSION}".encode() in head


def test_without_it_the_page_loads_the_plotly_wheels_full_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app, "STATIC", tmp_path)
    found = app.plotly_js()
    assert found.parent.name == "package_data" and found.parent.parent.name == "plotly"
    head = found.read_bytes()[:200]
    assert b"plotly.js v" in head and b"cartesian" not in head


def tarball(bundle: bytes) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        member = tarfile.TarInfo(hatch_build.MEMBER)
        member.size = len(bundle)
        archive.addfile(member, io.BytesIO(bundle))
    return data.getvalue()


class Response(io.BytesIO):
    def __enter__(self) -> Response:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def test_the_hook_takes_only_the_pinned_tarball(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = tarball(b"/* the bundle */")
    monkeypatch.setattr(hatch_build.urllib.request, "urlopen", lambda *_, **__: Response(served))
    target = tmp_path / "vendor" / "plotly-cartesian.min.js"
    with pytest.raises(ValueError, match="integrity"):
        hatch_build.fetch_bundle(target)
    assert not target.parent.exists()
    digest = base64.b64encode(hashlib.sha512(served).digest()).decode()
    monkeypatch.setattr(hatch_build, "INTEGRITY", f"sha512-{digest}")
    hatch_build.fetch_bundle(target)
    assert target.read_bytes() == b"/* the bundle */"
