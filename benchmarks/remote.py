"""Remote logdirs (issue #37): ``tbconvert tf --logdir s3://...`` against the bare transfer of
the same objects plus a local conversion of the copy, from one run, on a local S3-compatible
server (moto's, ``tests/support/s3server.py``, in a process of its own).

For each workload (the sweep of ``run.py`` #9: 2,000 runs, 3,000 objects, 22 MB; and one
1M-event file), interleaved ``--repeat`` times, each in a fresh subprocess:

- transfer: s3fs's own bulk download of the prefix (``fs.get(url, dir, recursive=True)``);
- local: ``tbconvert tf`` of that copy into a fresh store;
- remote: ``tbconvert tf --logdir s3://...`` into a fresh store.

The target: remote <= 1.5 x (transfer + local), medians.  Then a re-run of the remote
conversion with nothing changed: its wall time and the object bytes the server sent.

    .venv/bin/python benchmarks/remote.py [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPO))

import generate  # noqa: E402

from tests.support import s3server  # noqa: E402

_TRANSFER = (
    "import sys, s3fs\n"
    "fs = s3fs.S3FileSystem()\n"
    "fs.get(sys.argv[1] + '/', sys.argv[2], recursive=True)\n"
)


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _upload(server: s3server.S3Server, logdir: Path, bucket: str) -> tuple[str, int]:
    """Every file of ``logdir`` as an object; the URL and the bytes uploaded."""
    client = server.client()
    client.create_bucket(Bucket=bucket)
    total = 0
    for path in sorted(logdir.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            total += len(data)
            key = f"logdir/{path.relative_to(logdir).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=data)
    return f"s3://{bucket}/logdir", total


def _measure(
    name: str, logdir: Path, server: s3server.S3Server, repeat: int, scratch: Path
) -> dict[str, float]:
    url, size = _upload(server, logdir, name)
    env = {**os.environ, **server.env}
    tbconvert = [sys.executable, "-m", "tbconvert", "tf", "-q"]
    times: dict[str, list[float]] = {"transfer": [], "local": [], "remote": []}
    for index in range(repeat):
        copy = scratch / f"{name}-copy{index}"
        times["transfer"].append(_timed([sys.executable, "-c", _TRANSFER, url, str(copy)], env))
        local_store = scratch / f"{name}-local{index}.db"
        times["local"].append(
            _timed([*tbconvert, "--logdir", str(copy), "--store", str(local_store)], env)
        )
        remote_store = scratch / f"{name}-remote{index}.db"
        times["remote"].append(
            _timed([*tbconvert, "--logdir", url, "--store", str(remote_store)], env)
        )
        shutil.rmtree(copy)
    server.counts(reset=True)
    rerun = _timed([*tbconvert, "--logdir", url, "--store", str(remote_store)], env)
    fetched = server.counts(reset=True)["object_bytes"]
    result = {key: statistics.median(values) for key, values in times.items()}
    result.update(rerun=rerun, fetched=fetched, size=size)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small data: a smoke run")
    arguments = parser.parse_args()
    if arguments.quick:
        workloads = {
            "sweep": generate.Params(events=20_000, runs=100, tags=10, images=0),
            "one-file": generate.Params(events=100_000, runs=1, tags=10, images=0),
        }
    else:
        workloads = {
            "sweep": generate.Params(events=400_000, runs=2000, tags=10, images=0),
            "one-file": generate.Params(events=1_000_000, runs=1, tags=10, images=0),
        }
    datasets = {name: generate.ensure_scalars(params) for name, params in workloads.items()}
    print(f"remote logdirs: moto S3 server on 127.0.0.1, medians of {arguments.repeat}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    header = f"{'workload':<10}{'objects':>8}{'MB':>7}{'transfer':>10}{'local':>8}"
    print(header + f"{'remote':>8}{'ratio':>8}{'target':>8}{'re-run':>8}{'fetched':>9}")
    server = s3server.start()
    try:
        with tempfile.TemporaryDirectory(prefix="tbconvert-remote-") as scratch:
            for name, dataset in datasets.items():
                objects = sum(1 for path in dataset.logdir.rglob("*") if path.is_file())
                figures = _measure(name, dataset.logdir, server, arguments.repeat, Path(scratch))
                ratio = figures["remote"] / (figures["transfer"] + figures["local"])
                verdict = "PASS" if ratio <= 1.5 else "MISS"
                print(
                    f"{name:<10}{objects:>8}{figures['size'] / 1e6:>7.1f}"
                    f"{figures['transfer']:>9.2f}s{figures['local']:>7.2f}s"
                    f"{figures['remote']:>7.2f}s{ratio:>7.2f}x{verdict:>8}"
                    f"{figures['rerun']:>7.2f}s{int(figures['fetched']):>8}B"
                )
    finally:
        server.stop()
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print("ratio = remote / (transfer + local); target <= 1.5x. fetched = object bytes the")
    print("server sent for the re-run with nothing changed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
