"""Images, end to end (design §5 images, §6 v_images): what real writers put in event files comes
back through ``v_images`` byte for byte (compared by sha256), with format, width, height, idx,
step and wall_time.

Expectations come from what the test wrote: the arrays' shapes, the bytes it built, or, for
tensorboardX (which encodes the PNG itself), the bytes read back by TensorBoard's own event
file loader.  Nothing here decodes pixels in the converter's place, and nothing may crash: a
corrupt image and a decompression bomb are stored like any other image.
"""

from __future__ import annotations

import hashlib
import io
import resource
import struct
import zlib
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import tensorboardX
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.plugins.image import metadata as image_metadata

from tbconvert import convert
from tbconvert.plugins.images import _plain_png as plain_png
from tbconvert.plugins.images import image_header
from tests.support.eventfiles import event_file_name, summary_event, write_events
from tests.support.snapshots import connect, rows

W0 = 1_795_000_000.0
Key = tuple[str, int, int]  # (tag, step, idx)
Row = tuple[str, str | None, int | None, int | None, float]  # (sha256, format, w, h, wall_time)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pixels(seed: int, height: int, width: int, channels: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


def png(seed: int, width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels(seed, height, width)).save(out, format="PNG")
    return out.getvalue()


def gif(frames: int, width: int, height: int) -> bytes:
    images = [Image.fromarray(pixels(100 + i, height, width)) for i in range(frames)]
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=100)
    return out.getvalue()


def bomb_png(width: int, height: int) -> bytes:
    """A real 1x1 PNG whose IHDR claims width x height (CRC fixed, so it still parses)."""
    data = bytearray(png(0, 1, 1))
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def image_value(tag: str, data: bytes, width: int = 0, height: int = 0) -> Summary.Value:
    image = Summary.Image(encoded_image_string=data, width=width, height=height, colorspace=3)
    return Summary.Value(tag=tag, image=image)


def tf2_images(tag: str, width: int, height: int, images: list[bytes], md: bool = True) -> Any:
    tensor = TensorProto(dtype=7, string_val=[str(width).encode(), str(height).encode(), *images])
    tensor.tensor_shape.dim.add(size=len(images) + 2)
    value = Summary.Value(tag=tag, tensor=tensor)
    if md:
        value.metadata.CopyFrom(image_metadata.create_summary_metadata(tag, ""))
    return value


def stored(store: str) -> dict[Key, Row]:
    with closing(connect(store)) as conn:
        found = rows(
            conn, "SELECT tag, step, idx, data, format, width, height, wall_time FROM v_images"
        )
    result = {(t, s, i): (sha(d), f, w, h, wt) for t, s, i, d, f, w, h, wt in found}
    assert len(result) == len(found), "one row per (tag, step, idx)"
    return result


def count(store: str, sql: str) -> int:
    with closing(connect(store)) as conn:
        return int(conn.execute(sql).fetchone()[0])


def convert_ok(logdir: Path, store: str, **options: Any) -> Any:
    summary = convert(logdir, store, progress=False, **options)
    assert summary.exit_code == 0
    assert summary.to_dict()["undecodable"] == {}
    return summary


def test_tensorboardx_add_image_chw_hwc_and_grid(tmp_path: Path, store: str) -> None:
    from tensorboardX import SummaryWriter

    logdir, expected_dims = tmp_path / "logs", {"chw": (7, 5), "hwc": (9, 4), "grid": (6 * 3, 4)}
    first = {}
    with SummaryWriter(logdir=str(logdir), flush_secs=3600) as writer:
        for step in range(3):
            chw = pixels(step, 5, 7).transpose(2, 0, 1)
            first.setdefault("chw", chw.transpose(1, 2, 0))
            writer.add_image("chw", chw, step, walltime=W0 + step)
            writer.add_image(
                "hwc", pixels(10 + step, 4, 9), step, walltime=W0 + step, dataformats="HWC"
            )
            batch = np.stack([pixels(20 + step * 3 + i, 4, 6) for i in range(3)])
            writer.add_images("grid", batch.transpose(0, 3, 1, 2), step, walltime=W0 + step)
    expected: dict[Key, Row] = {}
    for path in logdir.iterdir():
        for record in RawEventFileLoader(str(path)).Load():
            event = Event.FromString(record)
            for value in event.summary.value:
                width, height = expected_dims[value.tag]
                expected[(value.tag, event.step, 0)] = (
                    sha(value.image.encoded_image_string),
                    "PNG",
                    width,
                    height,
                    event.wall_time,
                )
    assert len(expected) == 9
    convert_ok(logdir, store)
    assert stored(store) == expected
    with closing(connect(store)) as conn:
        data = conn.execute("SELECT data FROM v_images WHERE tag='chw' AND step=0").fetchone()[0]
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), first["chw"])


def test_gif_and_tf1_multi_image_tags(tmp_path: Path, store: str) -> None:
    video, faces = gif(4, 8, 6), [png(1, 5, 3), png(2, 3, 5)]
    events = [
        summary_event(
            step,
            W0 + step / 4,
            [
                image_value("video", video, 8, 6),
                image_value("faces/image/0", faces[0], 5, 3),
                image_value("faces/image/1", faces[1], 3, 5),
            ],
        )
        for step in (0, 10, 20)
    ]
    write_events(tmp_path / "logs" / event_file_name(W0), events)
    convert_ok(tmp_path / "logs", store)
    expected = {}
    for step in (0, 10, 20):
        wall_time = W0 + step / 4
        expected[("video", step, 0)] = (sha(video), "GIF", 8, 6, wall_time)
        expected[("faces/image/0", step, 0)] = (sha(faces[0]), "PNG", 5, 3, wall_time)
        expected[("faces/image/1", step, 0)] = (sha(faces[1]), "PNG", 3, 5, wall_time)
    assert stored(store) == expected
    assert count(store, "SELECT count(*) FROM blobs") == 3


def test_tf2_image_tensors_keep_index_with_metadata_once_or_always(
    tmp_path: Path, store: str
) -> None:
    steps, tags = [0, 1, 2, 5], ("once", "always")
    images = {
        (tag, step): [png(100 * t + 10 * step + i, 6, 4) for i in range(3)]
        for t, tag in enumerate(tags)
        for step in steps
    }
    # "once": metadata on the first event only (TF1 FileWriter); "always": on every event.
    events = [
        summary_event(
            step,
            W0 + step,
            [
                tf2_images("once", 6, 4, images[("once", step)], md=n == 0),
                tf2_images("always", 6, 4, images[("always", step)]),
            ],
        )
        for n, step in enumerate(steps)
    ]
    events.append(summary_event(9, W0 + 9, [tf2_images("always", 6, 4, [])]))  # k = 0
    write_events(tmp_path / "logs" / event_file_name(W0), events)
    summary = convert_ok(tmp_path / "logs", store)
    expected = {
        (tag, step, idx): (sha(data), "PNG", 6, 4, W0 + step)
        for (tag, step), batch in images.items()
        for idx, data in enumerate(batch)
    }
    assert stored(store) == expected
    assert summary.points["images"] == len(expected)
    assert count(store, "SELECT count(*) FROM series WHERE plugin='images'") == 2


def test_same_image_every_step_is_stored_once(tmp_path: Path, store: str) -> None:
    logo, other = png(7, 4, 4), png(8, 4, 4)
    events = [
        summary_event(
            step,
            W0 + step,
            [image_value("logo", logo, 4, 4), tf2_images("tf2", 4, 4, [logo, other, logo])],
        )
        for step in range(20)
    ]
    write_events(tmp_path / "logs" / event_file_name(W0), events)
    convert_ok(tmp_path / "logs", store)
    assert count(store, "SELECT count(*) FROM images") == 20 * 4
    assert count(store, "SELECT count(*) FROM blobs") == 2


def test_corrupt_images_are_stored_with_format_null(tmp_path: Path, store: str) -> None:
    junk = b"\x00junk" + np.random.default_rng(3).bytes(500)
    truncated = png(4, 8, 8)[:8] + b"\x00" * 20
    events = [
        summary_event(
            1,
            W0,
            [
                image_value("sized", junk, 12, 34),
                image_value("unsized", junk[:100]),
                tf2_images("tf2", 21, 13, [png(5, 21, 13), truncated]),
            ],
        )
    ]
    write_events(tmp_path / "logs" / event_file_name(W0), events)
    convert_ok(tmp_path / "logs", store)
    assert stored(store) == {
        ("sized", 1, 0): (sha(junk), None, 12, 34, W0),
        ("unsized", 1, 0): (sha(junk[:100]), None, None, None, W0),
        ("tf2", 1, 0): (sha(png(5, 21, 13)), "PNG", 21, 13, W0),
        ("tf2", 1, 1): (sha(truncated), None, 21, 13, W0),
    }


def test_decompression_bombs_are_stored_without_decoding(tmp_path: Path, store: str) -> None:
    huge, big = bomb_png(100_000, 100_000), bomb_png(10_000, 10_000)  # error / warning sizes
    write_events(
        tmp_path / "logs" / event_file_name(W0),
        [
            summary_event(
                0, W0, [image_value("huge", huge, 1, 1), tf2_images("big", 10_000, 10_000, [big])]
            )
        ],
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    convert_ok(tmp_path / "logs", store)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200, f"peak memory grew by {grown_mb:.0f} MB: pixels were decoded"
    assert stored(store) == {
        ("huge", 0, 0): (sha(huge), "PNG", 100_000, 100_000, W0),
        ("big", 0, 0): (sha(big), "PNG", 10_000, 10_000, W0),
    }


def test_unreadable_image_tensor_is_kept_raw_and_counted(tmp_path: Path, store: str) -> None:
    tensor = TensorProto(dtype=1, float_val=[1.0, 2.0])
    tensor.tensor_shape.dim.add(size=2)
    value = Summary.Value(tag="weird", tensor=tensor)
    value.metadata.CopyFrom(image_metadata.create_summary_metadata("weird", ""))
    write_events(tmp_path / "logs" / event_file_name(W0), [summary_event(0, W0, [value])])
    summary = convert(tmp_path / "logs", store, progress=False)
    assert summary.exit_code == 0
    assert summary.to_dict()["undecodable"] == {"images": {"weird": 1}}
    assert count(store, "SELECT count(*) FROM v_tensors WHERE tag='weird'") == 1
    assert count(store, "SELECT count(*) FROM images") == 0


def test_plugin_selection_skips_images_and_says_so(tmp_path: Path, store: str) -> None:
    from tensorboardX import SummaryWriter

    with SummaryWriter(logdir=str(tmp_path / "logs"), flush_secs=3600) as writer:
        for step in range(4):
            writer.add_scalar("loss", 1.0 / (step + 1), step, walltime=W0 + step)
            writer.add_image(
                "sample", pixels(step, 3, 3), step, walltime=W0 + step, dataformats="HWC"
            )
    summary = convert(tmp_path / "logs", store, progress=False, plugins=["scalars"])
    assert summary.exit_code == 0
    assert summary.to_dict()["skipped"] == {"images": {"sample": 4}}
    assert summary.points["scalars"] == 4
    assert count(store, "SELECT count(*) FROM images") == 0
    assert count(store, "SELECT count(*) FROM blobs") == 0


def pillow_reads(data: bytes) -> tuple[str | None, int | None, int | None]:
    """The oracle: what Pillow itself reads of the bytes' header, with no size limit."""
    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.format, image.size[0], image.size[1]
    except Exception:
        return None, None, None
    finally:
        Image.MAX_IMAGE_PIXELS = limit


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


@st.composite
def png_headers(draw: st.DrawFn) -> bytes:
    """A PNG signature and IHDR then IDAT, as writers make them, or with one or more of its
    fields off: any sizes, depths and methods, a wrong checksum or IHDR length, another chunk
    before the image data, bytes cut short."""

    def sometimes(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> Any:
        return draw(other) if draw(st.integers(0, 4)) == 0 else draw(usual)

    fields = struct.pack(
        ">IIBBBBB",
        sometimes(st.integers(1, 2**12), st.sampled_from([0, 2**31 - 1, 2**32 - 1])),
        sometimes(st.integers(1, 2**12), st.sampled_from([0, 2**31, 2**32 - 1])),
        *sometimes(
            st.sampled_from([(1, 0), (2, 0), (16, 0), (8, 2), (16, 2), (4, 3), (8, 3), (8, 4)])
            | st.sampled_from([(16, 4), (8, 6), (16, 6), (8, 0), (1, 3)]),
            st.tuples(st.integers(0, 255), st.integers(0, 255)),
        ),
        sometimes(st.just(0), st.integers(1, 255)),  # compression: Pillow's open ignores it
        sometimes(st.just(0), st.integers(1, 255)),  # filter
        sometimes(st.sampled_from([0, 1]), st.integers(2, 255)),  # interlace
    )
    header = png_chunk(b"IHDR", fields)
    if draw(st.integers(0, 5)) == 0:
        header = header[:-1] + bytes([header[-1] ^ (1 << draw(st.integers(0, 7)))])
    if draw(st.integers(0, 9)) == 0:
        header = struct.pack(">I", draw(st.sampled_from([0, 12, 14]))) + header[4:]
    following = sometimes(st.just(b"IDAT"), st.sampled_from([b"pHYs", b"IEND", b"idat", b"I\0AT"]))
    data = b"\x89PNG\r\n\x1a\n" + header + png_chunk(following, draw(st.binary(max_size=12)))
    data += png_chunk(b"IEND", b"")
    return data[: sometimes(st.just(len(data)), st.sampled_from([8, 33, 40, 41]))]


@settings(max_examples=400, deadline=None)
@given(png_headers())
def test_a_png_header_is_read_as_pillow_reads_it(data: bytes) -> None:
    assert image_header(data) == pillow_reads(data)


def test_pngs_that_writers_make_are_read_without_pillow(tmp_path: Path) -> None:
    tbx = tensorboardX.SummaryWriter(str(tmp_path))
    tbx.add_image("hwc", pixels(3, 5, 7), 0, dataformats="HWC")
    tbx.add_image("gray", pixels(4, 6, 2, 1)[:, :, 0], 0, dataformats="HW")
    tbx.close()
    written = [
        bytes(value.image.encoded_image_string)
        for path in tmp_path.iterdir()
        for record in RawEventFileLoader(str(path)).Load()
        for value in Event.FromString(record).summary.value
    ]
    assert len(written) == 2
    for data in [*written, png(5, 3, 4)]:
        assert plain_png(data) == pillow_reads(data) != (None, None, None)
