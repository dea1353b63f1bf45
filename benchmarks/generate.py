"""Synthetic TensorBoard logdirs for the benchmarks, cached in ``benchmarks/data/``.

    python benchmarks/generate.py                 # the default 1M-scalar-event logdir
    python benchmarks/generate.py --events 200000 --runs 2
    python benchmarks/generate.py --small-files   # 10,000 tiny files in 1,000 run dirs
    python benchmarks/generate.py --big           # ~2 GB (optional peak-RSS check)

Every record is a real ``tensorboard.compat.proto`` ``Event``, serialised by upb and framed
here as TFRecord (``u64 length | masked crc32c | payload | masked crc32c``) with the C CRC of
``google_crc32c``: tensorboard's pure-Python ``RecordWriter`` would take minutes for 1M
records.  No TensorFlow, no torch.

Layout of the scalar logdir (``Params``): ``runs`` run directories, alternating between

* ``run_NN_tf1``: one file, TF1 / torch / tensorboardX style: ``Summary.Value.simple_value``,
  no metadata; images as ``Summary.Image`` (PNG);
* ``run_NN_tf2``: Keras style, contexts ``train/`` and ``validation/`` (tags split between
  them), one ``.v2`` file each: rank-0 ``DT_FLOAT`` tensors in ``tensor_content`` with metadata
  ``{plugin_name: "scalars"}`` on every event, as TF2's ``SummaryFileWriter`` writes them;
  images (in ``train/``) as ``DT_STRING`` tensors ``[width, height, png]`` with metadata
  ``images`` on every event.

Events are step-major (every tag at step s, then step s+1), one value per event, like a
training loop calling ``add_scalar``.  Everything is deterministic (fixed seed and clock).

A logdir is cached under a directory named after its parameters (and this generator's
version) and built in a temporary directory renamed into place, so an interrupted generation
is never mistaken for a finished one.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA_DIR = HERE / "data"
GENERATOR_VERSION = 1

HOST = "benchhost"
T0 = 1_700_000_000.0
STEP_SECONDS = 0.05
FILE_VERSION = "brain.Event:2"
DT_FLOAT = 1
DT_STRING = 7

_MASK_DELTA = 0xA282EAD8
_U32 = struct.Struct("<I").pack
_U64 = struct.Struct("<Q").pack
_WRITE_EVERY = 1 << 16  # records buffered before a write


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Params:
    """What the scalar logdir holds.

    Attributes:
        events: Scalar events in total (one value per event), split evenly over the runs.
        runs: Run directories, alternating TF1 (even index) and TF2 (odd index).
        tags: Scalar tags per run (a TF2 run splits them between train/ and validation/).
        images: Image events per run (one image each), spread evenly over the steps.
        image_size: Width and height of the (noise) PNG images.
        seed: Seed of the values and images.
    """

    events: int = 1_000_000
    runs: int = 4
    tags: int = 10
    images: int = 8
    image_size: int = 64
    seed: int = 0

    def key(self) -> str:
        """Cache directory name: readable, plus a digest of every parameter."""
        blob = json.dumps({"v": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
        return f"scalars-e{self.events}-r{self.runs}-t{self.tags}-i{self.images}-{digest}"


@dataclass(frozen=True)
class SmallParams:
    """Many tiny event files (the no-change re-run benchmark).

    Attributes:
        files: Event files in total.
        run_dirs: Run directories they are spread over (files directly in each).
        events: Scalar events per file (after the file_version event).
    """

    files: int = 10_000
    run_dirs: int = 1_000
    events: int = 5

    def key(self) -> str:
        """Cache directory name."""
        blob = json.dumps({"v": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
        return f"small-f{self.files}-d{self.run_dirs}-e{self.events}-{digest}"


QUICK = Params(events=40_000, runs=4, tags=10, images=4)
BIG = Params(events=36_000_000, runs=8, tags=20, images=64, image_size=256)
QUICK_SMALL = SmallParams(files=500, run_dirs=50, events=5)


@dataclass(frozen=True)
class Dataset:
    """A generated logdir and what is in it (``manifest.json`` next to it)."""

    root: Path
    manifest: dict[str, Any]

    @property
    def logdir(self) -> Path:
        """The directory to hand to a converter."""
        return self.root / "logdir"

    def event_dirs(self) -> list[Path]:
        """Every directory that directly holds event files, sorted."""
        return [self.logdir / rel for rel in self.manifest["event_dirs"]]


# --------------------------------------------------------------------------- framing


def _masked_crc(data: bytes) -> int:
    import google_crc32c

    c = google_crc32c.value(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class _RecordFile:
    """Append framed records to a file; headers are cached per payload length."""

    def __init__(self, path: Path) -> None:
        import google_crc32c

        self.path = path
        self._f = open(path, "wb")  # noqa: SIM115  (closed in close())
        self._crc = google_crc32c.value
        self._headers: dict[int, bytes] = {}
        self._pending: list[bytes] = []
        self.records = 0
        self.bytes = 0

    def add(self, payload: bytes) -> None:
        header = self._headers.get(len(payload))
        if header is None:
            length = _U64(len(payload))
            header = self._headers[len(payload)] = length + _U32(_masked_crc(length))
        c = self._crc(payload)
        pending = self._pending
        pending.append(header)
        pending.append(payload)
        pending.append(_U32((((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF))
        self.records += 1
        if len(pending) >= 3 * _WRITE_EVERY:
            self._flush()

    def _flush(self) -> None:
        data = b"".join(self._pending)
        self._f.write(data)
        self.bytes += len(data)
        self._pending.clear()

    def close(self) -> None:
        self._flush()
        self._f.close()


# --------------------------------------------------------------------------- content


def _tag_names(count: int) -> list[str]:
    base = [
        "loss",
        "accuracy",
        "learning_rate",
        "grad_norm",
        "epoch_time",
        "precision",
        "recall",
        "f1",
        "auc",
        "perplexity",
    ]
    return [
        base[i % len(base)] + ("" if i < len(base) else f"_{i // len(base)}") for i in range(count)
    ]


def _curve(rng: Any, tag_index: int, steps: int) -> Any:
    """A float32 learning-curve-ish series with noise."""
    import numpy as np

    x = np.arange(steps, dtype=np.float64)
    scale = 1.0 + 0.3 * tag_index
    values = scale * np.exp(-x / max(steps / 4.0, 1.0)) + 0.05 * rng.standard_normal(steps)
    return values.astype("<f4")


def _png(rng: Any, size: int) -> bytes:
    import numpy as np
    from PIL import Image

    pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _plan(events: int, tags: int) -> tuple[int, int]:
    """(full steps, extra events in a last partial step) for ``events`` over ``tags`` tags."""
    return divmod(events, tags) if tags else (0, 0)


def _write_tf1_file(
    path: Path, tags: list[str], events: int, images: int, image_size: int, rng: Any
) -> dict[str, int]:
    """TF1 / torch / tensorboardX style: simple_value, Summary.Image without metadata."""
    from tensorboard.compat.proto.event_pb2 import Event

    out = _RecordFile(path)
    out.add(Event(wall_time=T0, file_version=FILE_VERSION).SerializeToString())
    steps, extra = _plan(events, len(tags))
    total_steps = steps + (1 if extra else 0)
    curves = [_curve(rng, i, total_steps).tolist() for i in range(len(tags))]
    image_every = max(total_steps // images, 1) if images else 0
    event = Event()
    value = event.summary.value.add()
    image_event = Event()
    image_value = image_event.summary.value.add(tag="samples/input")
    image_value.image.height = image_size
    image_value.image.width = image_size
    image_value.image.colorspace = 3
    serialize = event.SerializeToString
    add = out.add
    written = images_written = 0
    for step in range(total_steps):
        wall = T0 + step * STEP_SECONDS
        event.step = step
        for t, tag in enumerate(tags):
            if written == events:
                break
            event.wall_time = wall + t * 1e-4
            value.tag = tag
            value.simple_value = curves[t][step]
            add(serialize())
            written += 1
        if image_every and images_written < images and step % image_every == 0:
            image_event.step = step
            image_event.wall_time = wall + 0.01
            image_value.image.encoded_image_string = _png(rng, image_size)
            add(image_event.SerializeToString())
            images_written += 1
    out.close()
    return {
        "scalar_events": written,
        "image_events": images_written,
        "records": out.records,
        "bytes": out.bytes,
    }


def _write_tf2_file(
    path: Path, tags: list[str], events: int, images: int, image_size: int, rng: Any
) -> dict[str, int]:
    """TF2 style: rank-0 DT_FLOAT tensor_content and metadata on every event."""
    from tensorboard.compat.proto.event_pb2 import Event

    out = _RecordFile(path)
    out.add(Event(wall_time=T0, file_version=FILE_VERSION).SerializeToString())
    steps, extra = _plan(events, len(tags))
    total_steps = steps + (1 if extra else 0)
    contents = [_curve(rng, i, total_steps).tobytes() for i in range(len(tags))]
    image_every = max(total_steps // images, 1) if images else 0
    event = Event()
    value = event.summary.value.add()
    value.metadata.plugin_data.plugin_name = "scalars"
    value.tensor.dtype = DT_FLOAT
    value.tensor.tensor_shape.SetInParent()  # rank 0: an empty, present shape
    tensor = value.tensor
    image_event = Event()
    image_value = image_event.summary.value.add(tag="samples/input")
    image_value.metadata.plugin_data.plugin_name = "images"
    image_value.metadata.plugin_data.content = b""
    image_value.tensor.dtype = DT_STRING
    image_value.tensor.tensor_shape.dim.add(size=3)
    serialize = event.SerializeToString
    add = out.add
    written = images_written = 0
    for step in range(total_steps):
        wall = T0 + step * STEP_SECONDS
        event.step = step
        at = 4 * step
        for t, tag in enumerate(tags):
            if written == events:
                break
            event.wall_time = wall + t * 1e-4
            value.tag = tag
            tensor.tensor_content = contents[t][at : at + 4]
            add(serialize())
            written += 1
        if image_every and images_written < images and step % image_every == 0:
            image_event.step = step
            image_event.wall_time = wall + 0.01
            del image_value.tensor.string_val[:]
            image_value.tensor.string_val.extend(
                [str(image_size).encode(), str(image_size).encode(), _png(rng, image_size)]
            )
            add(image_event.SerializeToString())
            images_written += 1
    out.close()
    return {
        "scalar_events": written,
        "image_events": images_written,
        "records": out.records,
        "bytes": out.bytes,
    }


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _build_scalars(params: Params, logdir: Path) -> dict[str, Any]:
    import numpy as np

    if params.runs < 1 or params.tags < 2:
        raise ValueError("need at least 1 run and 2 tags")
    rng = np.random.default_rng(params.seed)
    tags = _tag_names(params.tags)
    files: list[dict[str, Any]] = []
    for r, run_events in enumerate(_split(params.events, params.runs)):
        stamp = int(T0) + 600 * r
        if r % 2 == 0:
            run = logdir / f"run_{r:02d}_tf1"
            run.mkdir(parents=True)
            path = run / f"events.out.tfevents.{stamp:010d}.{HOST}"
            stats = _write_tf1_file(path, tags, run_events, params.images, params.image_size, rng)
            files.append({"path": str(path.relative_to(logdir)), "encoding": "tf1", **stats})
            continue
        run = logdir / f"run_{r:02d}_tf2"
        halves = _split(run_events, 2)
        for c, (context, context_tags) in enumerate(
            (("train", tags[0::2]), ("validation", tags[1::2]))
        ):
            (run / context).mkdir(parents=True)
            path = run / context / f"events.out.tfevents.{stamp:010d}.{HOST}.{4242 + r}.{c}.v2"
            stats = _write_tf2_file(
                path,
                context_tags,
                halves[c],
                params.images if c == 0 else 0,
                params.image_size,
                rng,
            )
            files.append({"path": str(path.relative_to(logdir)), "encoding": "tf2", **stats})
    return {"files": files}


def _build_small(params: SmallParams, logdir: Path) -> dict[str, Any]:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    per_dir = _split(params.files, params.run_dirs)
    files: list[dict[str, Any]] = []
    n = 0
    for d, count in enumerate(per_dir):
        run = logdir / f"run_{d:04d}"
        run.mkdir(parents=True)
        for k in range(count):
            stamp = int(T0) + n
            path = run / f"events.out.tfevents.{stamp:010d}.{HOST}.{k}"
            out = _RecordFile(path)
            out.add(Event(wall_time=float(stamp), file_version=FILE_VERSION).SerializeToString())
            for step in range(params.events):
                out.add(
                    Event(
                        wall_time=stamp + step * 0.5,
                        step=step,
                        summary=Summary(
                            value=[Summary.Value(tag="loss", simple_value=1.0 / (step + 1))]
                        ),
                    ).SerializeToString()
                )
            out.close()
            files.append(
                {
                    "path": str(path.relative_to(logdir)),
                    "encoding": "tf1",
                    "scalar_events": params.events,
                    "image_events": 0,
                    "records": out.records,
                    "bytes": out.bytes,
                }
            )
            n += 1
    return {"files": files}


# --------------------------------------------------------------------------- cache


def _ensure(key: str, params: Any, build: Any, data_dir: Path, force: bool, log: Any) -> Dataset:
    root = data_dir / key
    manifest_path = root / "manifest.json"
    if force and root.exists():
        shutil.rmtree(root)
    if manifest_path.exists():
        return Dataset(root, json.loads(manifest_path.read_text()))
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = data_dir / f".tmp-{key}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    log(f"generating {key} ...")
    started = time.perf_counter()
    try:
        built = build(params, tmp / "logdir")
        files = built["files"]
        manifest = {
            "generator_version": GENERATOR_VERSION,
            "kind": type(params).__name__,
            "params": asdict(params),
            "files": len(files),
            "scalar_events": sum(f["scalar_events"] for f in files),
            "tf1_scalar_events": sum(f["scalar_events"] for f in files if f["encoding"] == "tf1"),
            "tf2_scalar_events": sum(f["scalar_events"] for f in files if f["encoding"] == "tf2"),
            "image_events": sum(f["image_events"] for f in files),
            "records": sum(f["records"] for f in files),
            "bytes": sum(f["bytes"] for f in files),
            "event_dirs": sorted({str(Path(f["path"]).parent) for f in files}),
            "generation_seconds": round(time.perf_counter() - started, 2),
            "file_list": files if len(files) <= 64 else [],
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        if root.exists():  # another process finished first
            shutil.rmtree(tmp)
        else:
            os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(
        f"generated {manifest['records']:,} records, {manifest['bytes'] / 1e6:,.1f} MB "
        f"in {manifest['generation_seconds']} s"
    )
    return Dataset(root, json.loads(manifest_path.read_text()))


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ensure_scalars(
    params: Params = Params(), *, data_dir: Path = DATA_DIR, force: bool = False, log: Any = _stderr
) -> Dataset:
    """The scalar logdir for ``params``, generated unless already cached."""
    return _ensure(params.key(), params, _build_scalars, data_dir, force, log)


def ensure_small(
    params: SmallParams = SmallParams(),
    *,
    data_dir: Path = DATA_DIR,
    force: bool = False,
    log: Any = _stderr,
) -> Dataset:
    """The many-tiny-files logdir for ``params``, generated unless already cached."""
    return _ensure(params.key(), params, _build_small, data_dir, force, log)


def iter_cached(data_dir: Path = DATA_DIR) -> Iterator[Path]:
    """Cached datasets (for cleaning up)."""
    if data_dir.is_dir():
        for entry in sorted(data_dir.iterdir()):
            if (entry / "manifest.json").exists():
                yield entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = Params()
    parser.add_argument(
        "--events",
        type=int,
        default=defaults.events,
        help="scalar events in total (default %(default)s)",
    )
    parser.add_argument("--runs", type=int, default=defaults.runs)
    parser.add_argument("--tags", type=int, default=defaults.tags, help="scalar tags per run")
    parser.add_argument("--images", type=int, default=defaults.images, help="image events per run")
    parser.add_argument("--image-size", type=int, default=defaults.image_size)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--quick", action="store_true", help="small data for a smoke run")
    parser.add_argument("--big", action="store_true", help=f"~2 GB logdir ({BIG.events:,} events)")
    parser.add_argument(
        "--small-files", action="store_true", help="the 10,000 tiny files logdir instead"
    )
    parser.add_argument("--force", action="store_true", help="regenerate even if cached")
    parser.add_argument("--list", action="store_true", help="list cached datasets")
    args = parser.parse_args(argv)
    if args.list:
        for entry in iter_cached():
            manifest = json.loads((entry / "manifest.json").read_text())
            print(f"{entry.name}\t{manifest['bytes'] / 1e6:,.1f} MB\t{manifest['files']} files")
        return 0
    if args.small_files:
        dataset = ensure_small(QUICK_SMALL if args.quick else SmallParams(), force=args.force)
    else:
        if args.quick:
            params = QUICK
        elif args.big:
            params = BIG
        else:
            params = Params(
                args.events, args.runs, args.tags, args.images, args.image_size, args.seed
            )
        dataset = ensure_scalars(params, force=args.force)
    manifest = {k: v for k, v in dataset.manifest.items() if k not in ("file_list", "event_dirs")}
    print(dataset.logdir)
    print(json.dumps(manifest, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
