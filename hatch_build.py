"""Build hook: the viewer's plotly.js, the cartesian partial bundle of the npm registry.

The viewer draws lines and heatmaps only, which plotly.js's cartesian bundle holds in a third
of the full bundle's size; a browser that never saw the page compiles it in half the time
(docs/performance.md, "The viewer (#46)").  The bundle is fetched at build time, pinned by
version and by the registry's sha512 integrity, into ``output/viewer/static/vendor/`` (not in
git), and the wheel carries it.  Without the registry the build goes on without it: the
viewer then serves the full bundle of the ``plotly`` wheel (``output/viewer/app.plotly_js``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "plotly.js-cartesian-dist-min"
VERSION = "4.1.1"
# The registry's ``dist.integrity`` of that version.
INTEGRITY = (
    "sha512-o8GrFeusncwBIxbBynRJpY4pkgVB6caM+JLpwrLYbbsO7dZ8FJ+"
    "SVN2Fr+L7kiG/Z6w4P5O0Jus/Qr5EefHVeg=="
)
TARBALL = f"https://registry.npmjs.org/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"
MEMBER = "package/plotly-cartesian.min.js"
TARGET = "tbconvert/output/viewer/static/vendor/plotly-cartesian.min.js"


def fetch_bundle(target: Path, timeout: float = 60.0) -> None:
    """Download the pinned tarball, check its integrity and write its bundle to ``target``.

    Raises:
        OSError: the registry cannot be reached.
        ValueError: the tarball is not the pinned one.
    """
    with urllib.request.urlopen(TARBALL, timeout=timeout) as response:
        data = response.read()
    found = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if found != INTEGRITY:
        raise ValueError(f"{TARBALL}: integrity {found}, expected {INTEGRITY}")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        member = archive.extractfile(MEMBER)
        if member is None:
            raise ValueError(f"{TARBALL}: no {MEMBER}")
        bundle = member.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    partial.write_bytes(bundle)
    partial.replace(target)


class PlotlyCartesianHook(BuildHookInterface):  # type: ignore[misc]
    """Puts the pinned bundle in the package before it is built."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        target = Path(self.root) / TARGET
        if not target.exists():
            try:
                fetch_bundle(target)
            except (OSError, ValueError) as error:
                self.app.display_warning(
                    f"{PACKAGE} {VERSION} not fetched ({error}); the viewer will serve the "
                    "full plotly.js of the plotly wheel"
                )
        if target.exists():
            # Not in git, so named to be carried.
            build_data["artifacts"].append(TARGET)
