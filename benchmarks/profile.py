"""Profile one tbconvert conversion of the benchmark data under cProfile.

    python benchmarks/profile.py                    # the default 1M-scalar-event logdir
    python benchmarks/profile.py --quick            # small data
    python benchmarks/profile.py --top 40 --output /tmp/tb.prof   # then: snakeviz /tmp/tb.prof

Runs ``tbconvert.convert(logdir, store=<fresh SQLite file>, progress=False)`` in this process
(``--jobs`` is passed through, but only this process is profiled) and prints the top
functions by cumulative and by total (own) time.  cProfile adds a roughly constant cost per
Python call, so functions called once per record look heavier than they are; compare the
plain wall time printed first with ``benchmarks/run.py`` for the real figure.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This file is called profile.py, like the standard module that cProfile imports: take
# benchmarks/ off the path until cProfile has its own ``profile``.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import pstats  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

import generate  # noqa: E402  (benchmarks/ is put on the path just above)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=generate.Params().events)
    parser.add_argument("--quick", action="store_true", help="small data")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--top", type=int, default=25, help="rows per listing (default 25)")
    parser.add_argument("--output", help="also save the raw profile here (pstats format)")
    parser.add_argument("--full-paths", action="store_true", help="do not strip directories")
    args = parser.parse_args(argv)

    params = generate.QUICK if args.quick else generate.Params(events=args.events)
    dataset = generate.ensure_scalars(params)
    import tbconvert  # after generation: its imports are not what we profile

    convert = tbconvert.convert  # the public API (design §10), whatever module holds it

    work = Path(tempfile.mkdtemp(prefix="profile-", dir=generate.DATA_DIR))
    try:
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        summary = convert(
            str(dataset.logdir), store=str(work / "profile.db"), progress=False, jobs=args.jobs
        )
        profiler.disable()
        wall = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)

    events = dataset.manifest["scalar_events"]
    print(
        f"tbconvert {tbconvert.__version__}: {dataset.root.name}: {events:,} scalar events, "
        f"points {dict(summary.points)}"
    )
    print(
        f"wall under cProfile: {wall:.2f} s ({events / wall:,.0f} events/s; "
        f"convert() says {summary.elapsed:.2f} s)\n"
    )
    if args.output:
        profiler.dump_stats(args.output)
        print(f"raw profile saved to {args.output}\n")
    for key, title in (("cumulative", "by cumulative time"), ("tottime", "by total (own) time")):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        if not args.full_paths:
            stats.strip_dirs()
        stats.sort_stats(key).print_stats(args.top)
        text = out.getvalue()
        # Drop pstats' preamble (call counts, "Ordered by"): keep the listing.
        listing = text[text.index("   ncalls") :] if "   ncalls" in text else text
        print(f"=== top {args.top} {title} ===")
        print(listing.rstrip() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
