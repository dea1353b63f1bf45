"""Stored images back as files: one file per image, bytes exactly as logged.

Tags and run paths come from logs and are data, never paths (design §9): ``../../x`` or an
absolute run directory must not write outside the output directory, and two tags that read
alike once cleaned (``a/b`` and ``a_b``) must not overwrite each other.  So a file name is
made of the cleaned run path, context, tag, step and index (characters outside
``[A-Za-z0-9._-]`` become ``_``, each part shortened), then the image's id (its content id in
the store), then a counter should the name still be taken; nothing in it is ever a separator.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import TYPE_CHECKING

from tbconvert.errors import ConverterError, UsageError
from tbconvert.filters import Globs
from tbconvert.store.engine import expand_path

if TYPE_CHECKING:
    from tbconvert.query.results import StoredImage
    from tbconvert.query.store import Store

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PART_LENGTH = 60
_EXTENSIONS = {"PNG": "png", "JPEG": "jpg", "GIF": "gif", "WEBP": "webp", "BMP": "bmp"}


def safe_part(text: str) -> str:
    """One piece of a file name: only ``[A-Za-z0-9._-]``, never starting with a dot, short."""
    cleaned = _UNSAFE.sub("_", text).lstrip(".-")[:_PART_LENGTH]
    return cleaned or "_"


def image_file_name(image: StoredImage) -> str:
    """The file name of one image, before de-duplication (see the module docstring)."""
    parts = [image.run_path, image.context or "_", image.tag]
    extension = _EXTENSIONS.get((image.format or "").upper(), "bin")
    stem = "-".join(safe_part(part) for part in parts)
    return f"{stem}-step{image.step}-{image.idx}-id{image.blob_id}.{extension}"


def export_images(
    store: Store,
    directory: str,
    run: Globs = None,
    tag: Globs = None,
    context: Globs = None,
    step: int | None = None,
) -> int:
    """Write every selected image into ``directory`` (created if missing), one file each.

    Args:
        store: An open store.
        directory: Where to write; ``-`` is refused (images are files, not a stream).
        run: Globs on run paths.
        tag: Globs on tags.
        context: Globs on contexts.
        step: Only images of this step.

    Returns:
        The number of files written.

    Raises:
        UsageError: ``directory`` is ``-``.
        ConverterError: ``directory`` is an existing file, or cannot be created or written.
    """
    if directory == "-":
        raise UsageError("images are written as files", hint="give -o DIRECTORY")
    target = os.path.realpath(expand_path(directory))
    if os.path.exists(target) and not os.path.isdir(target):
        raise ConverterError(
            "images go into a directory, and this is a file",
            path=directory,
            hint="give a directory: it is made when missing",
        )
    try:
        os.makedirs(target, exist_ok=True)
    except OSError as error:
        raise ConverterError(
            f"cannot create the directory: {error.strerror or error}", path=directory
        ) from error
    used: set[str] = set()
    for image in store.images(run=run, tag=tag, context=context, step=step):
        name = image_file_name(image)
        stem, extension = name.rsplit(".", 1)
        counter = 1
        while name in used:
            counter += 1
            name = f"{stem}-{counter}.{extension}"
        used.add(name)
        _write(target, name, image.data)
    return len(used)


def _write(directory: str, name: str, data: bytes) -> None:
    path = os.path.join(directory, name)
    # The name holds no separator; this guards the invariant should that ever change.
    if os.path.dirname(path) != directory:
        raise ConverterError("an image file name left the output directory", path=path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tbconvert-", dir=directory)
    except OSError as error:
        raise ConverterError(f"cannot write: {error.strerror or error}", path=path) from error
    try:
        with open(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)  # mkstemp's 0600 is for secrets, not pictures
        # Replacing never follows a symlink that may sit at ``path``.
        os.replace(temporary, path)
    except BaseException as error:
        os.unlink(temporary)
        if isinstance(error, OSError):
            raise ConverterError(f"cannot write: {error.strerror or error}", path=path) from error
        raise
