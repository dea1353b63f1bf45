"""Run mutmut module by module, each against the test files aimed at it (``make mutate``).

    python tests/mutation_run.py ['converter.reading.records.*' ...]   # mutant name globs

mutmut runs, for each mutant, the tests that called the mutated function; a conversion calls
nearly everything, so with the whole suite one surviving mutant would cost a minute.  Here each
module's mutants run only the tests of the files listed for it below (tests/conftest.py
deselects the others when ``TBCONVERT_MUTATION_TESTS`` is set), SQLite only
(``TBCONVERT_SKIP_POSTGRES``).
Results accumulate in ``mutants/``; ``tests/mutation_report.py`` prints the scores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_FRAMING = ["test_records.py", "test_bad_input.py", "test_mutants_reading.py"]
_DECODING = [
    *_FRAMING,
    "test_scalars.py",
    "test_oracle.py",
    "test_histograms.py",
    "test_images.py",
    "test_text.py",
    "test_audio.py",
    "test_tensors.py",
    "test_hparams.py",
]
_CONVERSION = [
    "test_incremental.py",
    "test_invariant.py",
    "test_store.py",
    "test_scalars.py",
    "test_mutants_job.py",
]
# Module -> the test files its mutants are tried against.
TESTS = {
    "converter.reading.crc": _FRAMING,
    "converter.reading.resync": _FRAMING,
    "converter.reading.events": _DECODING,
    "converter.reading.blocks": _FRAMING,
    "converter.reading.records": _FRAMING,
    "converter.reading.discovery": [
        "test_discovery.py",
        "test_paths.py",
        "test_invariant.py",
        "test_mutants_discovery.py",
    ],
    "converter.conversion.plan": _CONVERSION,
    "converter.reading.chunks": [*_FRAMING, "test_scalars.py", "test_incremental.py"],
    "converter.reading.fastscalars": _DECODING,
    "converter.reading.decoder": _DECODING,
    "converter.store.writer": _CONVERSION,
    "converter.conversion.job": _CONVERSION,
}


def test_files_for(mutant: str) -> set[str]:
    """The test files a mutant (mutmut's name, ``module.function__mutmut_N``) is tried
    against; every listed file for any other name (mutmut's mapping and clean runs)."""
    for module, files in TESTS.items():
        if mutant.startswith(module + "."):
            return set(files)
    return {name for files in TESTS.values() for name in files}


def main(mutants: list[str]) -> int:
    """mutmut on the given mutant name globs (default: every mutant), then the scores."""
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "TBCONVERT_SKIP_POSTGRES": "1",
        "TBCONVERT_MUTATION_TESTS": "by-module",
    }
    code = subprocess.run(
        [str(bin_dir / "mutmut"), "run", *mutants], cwd=ROOT, env=env, check=False
    ).returncode
    report = [sys.executable, str(ROOT / "tests" / "mutation_report.py")]
    return code or subprocess.run(report, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
