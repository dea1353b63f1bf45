"""Mutation score per module from mutmut's results in ``mutants/`` (``make mutate``).

    python tools/mutation_report.py [--survivors] [--sample FRACTION --seed N]

Killed counts mutants that a test failed on, that timed out, or that mypy (strict, as CI runs
it) rejects, and the survivors named (in backquotes) under the "Killed by hand" heading of
docs/mutation.md (PostgreSQL-only tests, which the mutation runs skip).  Mutants named under
its "Equivalent mutants" heading are left out of the denominator of the second score.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.mutation_run import all_mutants, sample

ROOT = Path(__file__).resolve().parents[1]
# mutmut's exit codes: a test failed (1, 3), mypy rejected it (37), it ran out of time (36,
# and the signals of its CPU limit).
KILLED = {1: "killed", 3: "killed", 37: "type check"}
TIMEOUT = {36, 24, -24, 152, 255}
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}


def listed_mutants(heading: str) -> set[str]:
    """Mutant names listed under a heading (``## ...``) of docs/mutation.md."""
    doc = ROOT / "docs" / "mutation.md"
    if not doc.exists():
        return set()
    text = doc.read_text(encoding="utf-8")
    if f"## {heading}" not in text:
        return set()
    section = text.split(f"## {heading}", 1)[-1].split("\n## ", 1)[0]
    return set(re.findall(r"`([\w.ǁ]+__mutmut_\d+)`", section))


def equivalent_mutants() -> set[str]:
    """Mutant names listed under the "Equivalent mutants" heading of docs/mutation.md."""
    return listed_mutants("Equivalent mutants")


def results(argv: list[str]) -> dict[str, dict[str, int | None]]:
    """Module -> mutant name -> mutmut's exit code (None: not run yet); only the sample's
    mutants under ``--sample FRACTION --seed N``."""
    found = all_mutants()
    if "--sample" in argv:
        fraction = float(argv[argv.index("--sample") + 1])
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 17
        chosen = sample(fraction, seed)
        found = {
            module: {name: code for name, code in codes.items() if name in chosen}
            for module, codes in found.items()
        }
    return found


def _line(name: str, counts: Counter[str]) -> str:
    checked = counts["mutants"] - counts["todo"]
    score = counts["killed"] / checked if checked else 0.0
    rest = checked - counts["equivalent"]
    adjusted = counts["killed"] / rest if rest else 0.0
    return (
        f"{name:34} {counts['mutants']:7} {counts['killed']:6} {counts['timeout']:4} "
        f"{counts['survived']:5} {counts['equivalent']:6} {counts['todo']:5} {score:6.1%} "
        f"{adjusted:7.1%}"
    )


def main(argv: list[str]) -> int:
    """Print the table (and the survivors with ``--survivors``)."""
    equivalent = equivalent_mutants()
    by_hand = listed_mutants("Killed by hand")
    total: Counter[str] = Counter()
    print(
        f"{'module':34} {'mutants':>7} {'killed':>6} {'(tmo':>4} {'surv.':>5} {'equiv.':>6} "
        f"{'todo':>5} {'score':>6} {'w/o eq.':>7}"
    )
    survivors = []
    for module, codes in results(argv).items():
        counts: Counter[str] = Counter(mutants=len(codes))
        for name, code in codes.items():
            if code is None:
                counts["todo"] += 1
            elif code in KILLED or code in TIMEOUT or name in by_hand:
                counts["killed"] += 1
                counts["timeout"] += code in TIMEOUT
            elif name in equivalent:
                counts["equivalent"] += 1
            else:
                counts["survived"] += 1
                survivors.append(f"{name}: {SURVIVED.get(code, f'exit {code}')}")
        print(_line(module, counts))
        total.update(counts)
    print(_line("all", total))
    if "--survivors" in argv:
        print("\n".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
