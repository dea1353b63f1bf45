"""Write the demo logdir of ``make demo``: a small learning-rate sweep with every kind of data.

    python sample_logdirs/make_demo.py DIR

``DIR/demo/lr_0.001``, ``lr_0.01`` and ``lr_0.1`` each hold, in the run directory, scalars
(``loss``, ``accuracy``, ``learning_rate``), ``samples`` images, ``weights`` histograms, a
``notes`` text and an hparams session (``lr``, ``optimizer``, ``batch_size``); and in a
``validation`` context, ``loss`` and ``accuracy`` every 10 steps.  ``lr_0.1`` diverges: its
loss turns NaN at step 70.

Only tensorboard's own protos and record writer are used (tensorboard is a dependency of
tbconvert; no TensorFlow, no tensorboardX), with fixed seeds, wall times and file names, so
running it again rewrites the same bytes.
"""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionStartInfo
from tensorboard.summary.writer.record_writer import RecordWriter

W0 = 1_800_000_000.0
STEPS = 100
RUNS = {"lr_0.001": (0.001, "sgd"), "lr_0.01": (0.01, "adam"), "lr_0.1": (0.1, "adam")}
DIVERGES_AT = {"lr_0.1": 70}


def loss_at(run: str, step: int, rng: np.random.Generator) -> float:
    """A decaying loss with noise, faster for larger learning rates; NaN once diverged."""
    lr = RUNS[run][0]
    if step >= DIVERGES_AT.get(run, STEPS + 1):
        return math.nan
    return float(2.0 * math.exp(-lr * 40 * step / STEPS) + 0.05 * rng.random() + 0.1)


def accuracy_at(run: str, step: int, rng: np.random.Generator) -> float:
    lr = RUNS[run][0]
    return float(
        min(0.99, 0.1 + 0.85 * (1 - math.exp(-lr * 60 * step / STEPS)) + 0.02 * rng.random())
    )


def scalar(tag: str, value: float) -> Summary.Value:
    return Summary.Value(tag=tag, simple_value=value)


def image(tag: str, run: str, step: int) -> Summary.Value:
    """A 32x32 pattern whose colour tells the run and whose stripes tell the step."""
    index = sorted(RUNS).index(run)
    y, x = np.mgrid[0:32, 0:32]
    pixels = np.zeros((32, 32, 3), dtype=np.uint8)
    pixels[..., index] = 128 + 127 * ((x + y + step // 10) % 8 < 4)
    pixels[..., (index + 1) % 3] = (4 * x * (step + 1) // STEPS).astype(np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, format="PNG")
    picture = Summary.Image(
        height=32, width=32, colorspace=3, encoded_image_string=encoded.getvalue()
    )
    return Summary.Value(tag=tag, image=picture)


def histogram(tag: str, values: np.ndarray) -> Summary.Value:
    counts, edges = np.histogram(values, bins=30)
    proto = HistogramProto(
        min=float(values.min()),
        max=float(values.max()),
        num=float(values.size),
        sum=float(values.sum()),
        sum_squares=float((values**2).sum()),
        bucket_limit=[float(edge) for edge in edges[1:]],
        bucket=[float(count) for count in counts],
    )
    return Summary.Value(tag=tag, histo=proto)


def text(tag: str, value: str) -> Summary.Value:
    tensor = TensorProto(
        dtype=7,  # DT_STRING
        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
        string_val=[value.encode("utf-8")],
    )
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    return Summary.Value(tag=tag, tensor=tensor, metadata=metadata)


def hparams(lr: float, optimizer: str) -> Summary.Value:
    start = SessionStartInfo(group_name="demo", start_time_secs=W0)
    start.hparams["lr"].number_value = lr
    start.hparams["optimizer"].string_value = optimizer
    start.hparams["batch_size"].number_value = 64
    content = HParamsPluginData(version=0, session_start_info=start).SerializeToString()
    metadata = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="hparams", content=content)
    )
    return Summary.Value(tag="_hparams_/session_start_info", metadata=metadata)


def write(path: Path, events: list[Event]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(Event(wall_time=W0, file_version="brain.Event:2").SerializeToString())
        for event in events:
            writer.write(event.SerializeToString())


def run_events(run: str) -> tuple[list[Event], list[Event]]:
    """The events of the run directory and of its validation context."""
    lr, optimizer = RUNS[run]
    rng = np.random.default_rng(sorted(RUNS).index(run))
    main = [Event(wall_time=W0, step=0, summary=Summary(value=[hparams(lr, optimizer)]))]
    validation = []
    for step in range(STEPS):
        wall_time = W0 + 6.0 * step
        values = [
            scalar("loss", loss_at(run, step, rng)),
            scalar("accuracy", accuracy_at(run, step, rng)),
            scalar("learning_rate", lr * 0.5 ** (step // 40)),
        ]
        if step % 10 == 0 or step == STEPS - 1:
            weights = rng.normal(0.0, 1.0 / (1 + step * lr * 10), size=500)
            values.append(histogram("weights", weights))
            validation.append(
                Event(
                    wall_time=wall_time + 3,
                    step=step,
                    summary=Summary(
                        value=[
                            scalar("loss", loss_at(run, step, rng) + 0.08),
                            scalar("accuracy", accuracy_at(run, step, rng) - 0.04),
                        ]
                    ),
                )
            )
        if step in (0, 50, STEPS - 1):
            values.append(image("samples", run, step))
        main.append(Event(wall_time=wall_time, step=step, summary=Summary(value=values)))
    note = f"diverged at step {DIVERGES_AT[run]}" if run in DIVERGES_AT else "converged"
    main.append(
        Event(
            wall_time=W0 + 6.0 * STEPS, step=STEPS - 1, summary=Summary(value=[text("notes", note)])
        )
    )
    return main, validation


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print("usage: python sample_logdirs/make_demo.py DIR", file=sys.stderr)
        return 2
    root = Path(argv[0]) / "demo"
    for run in RUNS:
        main_events, validation = run_events(run)
        name = f"events.out.tfevents.{int(W0)}.demo"
        write(root / run / name, main_events)
        write(root / run / "validation" / name, validation)
    print(f"demo logdir written: {root.parent} ({len(RUNS)} runs under demo/)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
