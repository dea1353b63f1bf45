"""Peak memory on huge records (issue #40): one event file holding two big image records.

    python benchmarks/memory.py                  # 50, 150 and 500 MB records (make bench)
    python benchmarks/memory.py --sizes 150      # one case
    python benchmarks/memory.py --json

For each record size S, a logdir with one event file (a file-version event, two images of S
MiB each, a scalar before, between and after them) is generated once in a forked child and
cached in ``benchmarks/data/``.  ``tbconvert tf`` converts it into a fresh SQLite store in a
subprocess of its own, and its peak RSS is read from ``wait4`` of that very child (as in
``run.py``).  The target is twice the record plus a fixed 150 MB; the stored images are then
checked byte for byte (their sha256, read back in pieces in another child), so a figure over
wrong output cannot pass.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import generate
from run import Measured, measure

MIB = 1 << 20
BASE_MB = 150
IMAGES = 2
DEFAULT_SIZES = (50, 150, 500)
GENERATOR_VERSION = 1
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_like(size: int, seed: int) -> bytes:
    """``size`` bytes that start as a PNG whose header the converter reads (a valid IHDR chunk,
    then an IDAT one), the rest random: no two images alike, so none is stored once for two."""
    ihdr = struct.pack(">IIBBBBB", 4096, 4096, 8, 2, 0, 0, 0)
    head = (
        _PNG_MAGIC
        + struct.pack(">I", len(ihdr))
        + b"IHDR"
        + ihdr
        + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
        + struct.pack(">I", size)
        + b"IDAT"
    )
    body = bytearray(os.urandom(size - len(head)))
    body[:8] = struct.pack("<Q", seed)
    return head + bytes(body)


def _write_case(directory: Path, size_mb: int) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    building = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(building, ignore_errors=True)
    (building / "run").mkdir(parents=True)
    path = building / "run" / f"events.out.tfevents.{int(generate.T0)}.{generate.HOST}"
    records = generate._RecordFile(path)
    version = Event(wall_time=generate.T0, file_version=generate.FILE_VERSION)
    records.add(version.SerializeToString())
    digests = []

    def scalar(step: int) -> None:
        value = Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
        event = Event(wall_time=generate.T0 + step, step=step, summary=Summary(value=[value]))
        records.add(event.SerializeToString())

    for step in range(IMAGES):
        scalar(step)
        data = _png_like(size_mb * MIB, step)
        digests.append(hashlib.sha256(data).hexdigest())
        image = Summary.Image(height=4096, width=4096, colorspace=3, encoded_image_string=data)
        value = Summary.Value(tag="big", image=image)
        event = Event(wall_time=generate.T0 + step, step=step, summary=Summary(value=[value]))
        del data, image, value
        records.add(event.SerializeToString())
        del event
        records._flush()
    scalar(IMAGES)
    records.close()
    (building / "manifest.json").write_text(json.dumps({"images": sorted(digests)}))
    building.rename(directory)


def _case(size_mb: int) -> Path:
    """The cached logdir of one size, generated in a forked child when missing: generating
    here would raise this process's high-water mark, where every later child's peak starts."""
    directory = generate.DATA_DIR / f"memory-{size_mb}mb-v{GENERATOR_VERSION}"
    if not directory.exists():
        print(f"generating {IMAGES} images of {size_mb} MiB ...", file=sys.stderr, flush=True)
        child = multiprocessing.get_context("fork").Process(
            target=_write_case, args=(directory, size_mb)
        )
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"generating the {size_mb} MiB case failed ({child.exitcode})")
    return directory


_CHECK = """
import hashlib, json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
found = []
for (rowid,) in db.execute("SELECT id FROM blobs"):
    digest = hashlib.sha256()
    with db.blobopen("blobs", "data", rowid, readonly=True) as blob:
        while piece := blob.read(1 << 24):
            digest.update(piece)
    found.append(digest.hexdigest())
print(json.dumps(sorted(found)))
"""


def _stored_images(store: Path) -> list[str]:
    """The sha256 of every blob the store holds, read in pieces in a child of its own."""
    measured = measure([sys.executable, "-c", _CHECK, str(store)])
    if not measured.ok:
        raise SystemExit(f"reading the store back failed:\n{measured.stderr}")
    found: list[str] = json.loads(measured.stdout)
    return found


def run_case(size_mb: int, workdir: Path) -> dict[str, Any]:
    """Convert one case into a fresh store; its peak RSS, its target and whether it holds
    exactly the images written."""
    logdir = _case(size_mb)
    expected = json.loads((logdir / "manifest.json").read_text())["images"]
    # Read once beforehand, so the conversion finds the file in the page cache.
    for path in logdir.rglob("events.*"):
        with open(path, "rb") as f:
            while f.read(64 * MIB):
                pass
    store = workdir / f"memory-{size_mb}.db"
    cmd = [sys.executable, "-m", "tbconvert", "tf", "--logdir", str(logdir)]
    converted: Measured = measure([*cmd, "--store", str(store), "-q", "--json"])
    exact = converted.returncode == 0 and _stored_images(store) == expected
    for leftover in workdir.glob(f"memory-{size_mb}.db*"):
        leftover.unlink()
    target = 2 * size_mb + BASE_MB
    return {
        "record_mb": size_mb,
        "peak_rss_mb": round(converted.maxrss_mb),
        "target_mb": target,
        "wall_s": round(converted.wall, 2),
        "exact": exact,
        "returncode": converted.returncode,
        "stderr": converted.stderr.strip().splitlines()[-3:],
        "pass": exact and converted.maxrss_mb < target and converted.rss_known,
    }


def main() -> None:
    """Run the cases named on the command line and print one line (or JSON) per case."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help="record sizes in MiB, comma-separated (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    results = []
    with tempfile.TemporaryDirectory(prefix="tbconvert-memory-") as workdir:
        if not args.json:
            print(f"{'record':>8} {'peak RSS':>9} {'target':>8} {'wall':>7}  verdict")
        for size in sizes:
            result = run_case(size, Path(workdir))
            results.append(result)
            if not args.json:
                verdict = "PASS" if result["pass"] else "MISS"
                if not result["exact"]:
                    verdict += f" (CHECK: store differs; exit {result['returncode']})"
                print(
                    f"{size:>5} MB {result['peak_rss_mb']:>6} MB {result['target_mb']:>5} MB "
                    f"{result['wall_s']:>6.1f}s  {verdict}",
                    flush=True,
                )
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
