"""Run mutmut module by module, each against the test files aimed at it (``make mutate``).

    python tools/mutation_run.py ['tbconvert.reading.records.*' ...]   # mutant name globs
    python tools/mutation_run.py --sample 0.25 --seed 17               # a stratified sample
    python tools/mutation_run.py --sample 0.25 --seed 17 --survivors   # its survivors again

mutmut runs, for each mutant, the tests that called the mutated function; a conversion calls
nearly everything, so with the whole suite one surviving mutant would cost a minute.  Here each
module's mutants run only the tests of the files listed for it below (tests/conftest.py
deselects the others when ``TBCONVERT_MUTATION_TESTS`` is set), SQLite only
(``TBCONVERT_SKIP_POSTGRES``).
Results accumulate in ``mutants/``; ``tools/mutation_report.py`` prints the scores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# mutmut's exit codes of a mutant that no test failed on (0) or that no test ran (5, 33).
SURVIVED = (0, 5, 33)

# Framing, blocks, block decoding, lenient parsing, the decoder and chunks: every reading
# module's mutants are tried against these (a mutant anywhere there changes what records become).
_READING = [
    "test_records.py",
    "test_blocks.py",
    "test_block_scalars.py",
    "test_events.py",
    "test_decoder.py",
    "test_chunks.py",
    "test_bad_input.py",
]
_DECODING = [
    *_READING,
    "test_scalars.py",
    "test_oracle.py",
    "test_histograms.py",
    "test_images.py",
    "test_text.py",
    "test_audio.py",
    "test_tensors.py",
    "test_hparams_plugin.py",
]
# Not test_store.py (schema and migrations): alembic's Config binds sys.stdout when imported,
# which under mutmut is a capture that is closed by the time the mutants run.
_CONVERSION = [
    "test_incremental.py",
    "test_invariant.py",
    "test_scalars.py",
    "test_summary.py",
    "test_group_commit.py",
    "test_concurrent_converters.py",
    "test_writer_ids.py",
    "test_discovery.py",
]
# Module -> the test files its mutants are tried against.
TESTS = {
    "tbconvert.reading.crc": _READING,
    "tbconvert.reading.resync": _READING,
    "tbconvert.reading.events": _DECODING,
    "tbconvert.reading.fast.blocks": _READING,
    "tbconvert.reading.records": _READING,
    "tbconvert.reading.first_record": [*_READING, "test_incremental.py"],
    "tbconvert.reading.discovery": ["test_discovery.py", "test_paths.py", "test_invariant.py"],
    "tbconvert.conversion.plan": _CONVERSION,
    "tbconvert.reading.chunks": [
        *_READING,
        "test_scalars.py",
        "test_incremental.py",
        "test_by_record.py",
    ],
    "tbconvert.reading.fast.block_scalars": _DECODING,
    "tbconvert.reading.fast.block_template": _DECODING,
    "tbconvert.reading.routing": [*_DECODING, "test_by_record.py", "test_scalar_keys.py"],
    "tbconvert.reading.decoder": [*_DECODING, "test_by_record.py", "test_scalar_keys.py"],
    "tbconvert.reading.fast.template": ["test_scalar_keys.py", "test_oracle.py"],
    "tbconvert.writing.writer": _CONVERSION,
    "tbconvert.writing.file_states": _CONVERSION,
    "tbconvert.conversion.job": _CONVERSION,
    "tbconvert.conversion.applying": _CONVERSION,
    "tbconvert.conversion.commits": _CONVERSION,
}


# The tests written to kill the survivors of a round carry this marker, beside the tests of
# the behaviour they pin down; ``--before`` leaves them out (docs/mutation.md).
GAP_MARKER = "mutant_gap"


def test_files_for(mutant: str) -> set[str]:
    """The test files a mutant (mutmut's name, ``module.function__mutmut_N``) is tried
    against; every listed file for any other name (mutmut's mapping and clean runs)."""
    chosen = {name for files in TESTS.values() for name in files}
    for module, files in TESTS.items():
        if mutant.startswith(module + "."):
            chosen = set(files)
    return chosen


def leaves_out_gap_tests() -> bool:
    """Whether this run is the score "before" the tests written for mutants (``--before``):
    then the tests marked ``GAP_MARKER`` are deselected."""
    return os.environ.get("TBCONVERT_MUTATION_BEFORE") == "1"


def all_mutants() -> dict[str, dict[str, int | None]]:
    """Module file -> mutant name -> mutmut's exit code so far (None: not run), from the
    ``.meta`` files mutmut writes beside each mutated module in ``mutants/``."""
    found: dict[str, dict[str, int | None]] = {}
    for meta in sorted((ROOT / "mutants" / "tbconvert").rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        if codes:
            found[meta.relative_to(ROOT / "mutants").as_posix().removesuffix(".meta")] = codes
    return found


def sample(fraction: float, seed: int) -> set[str]:
    """The mutants whose hash (with ``seed``) falls in the first ``fraction`` of the range:
    about that fraction of each module, a random sample, and a smaller fraction's sample lies
    within a larger one's (for a score per module when running them all takes too long)."""
    return {
        name
        for codes in all_mutants().values()
        for name in codes
        if int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "big")
        < fraction * 2**64
    }


def main(argv: list[str]) -> int:
    """mutmut on the given mutant name globs (default: every mutant), or on the mutants of
    ``--sample FRACTION --seed N`` not run yet; then the scores."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mutants", nargs="*", help="mutant name globs (default: all)")
    parser.add_argument("--sample", type=float, help="run this fraction of each module")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--before", action="store_true", help=f"without the tests marked {GAP_MARKER}"
    )
    parser.add_argument(
        "--survivors", action="store_true", help="run the sample's survivors again (only)"
    )
    args = parser.parse_args(argv)
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "TBCONVERT_SKIP_POSTGRES": "1",
        "TBCONVERT_MUTATION_TESTS": "by-module",
        "TBCONVERT_MUTATION_BEFORE": "1" if args.before else "0",
    }
    mutmut = [str(bin_dir / "mutmut"), "run"]
    names = list(args.mutants)
    if args.sample is not None:
        if not all_mutants():  # mutmut makes the mutants as it starts
            subprocess.run([*mutmut, "no-such-mutant"], cwd=ROOT, env=env, check=False)
        codes = {name: code for found in all_mutants().values() for name, code in found.items()}
        wanted = SURVIVED if args.survivors else (None,)
        names = sorted(name for name in sample(args.sample, args.seed) if codes[name] in wanted)
        print(f"{len(names)} sampled mutants to run", flush=True)
    code = 0
    if names or args.sample is None:
        code = subprocess.run([*mutmut, *names], cwd=ROOT, env=env, check=False).returncode
    report = [sys.executable, str(ROOT / "tools" / "mutation_report.py")]
    if args.sample is not None:
        report += ["--sample", str(args.sample), "--seed", str(args.seed)]
    return code or subprocess.run(report, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
