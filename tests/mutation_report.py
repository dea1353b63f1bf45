"""Mutation score per module from mutmut's results in ``mutants/`` (``make mutate``).

    python tests/mutation_report.py [--survivors]

Killed counts mutants that a test failed on, that timed out, or that mypy (strict, as CI runs
it) rejects.  Mutants listed as equivalent in docs/mutation.md (a line ``- `name` ...`` under
its "Equivalent mutants" heading) are left out of the denominator of the second score.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KILLED = {1: "killed", 3: "killed", 36: "timeout", 37: "type check"}
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}


def equivalent_mutants() -> set[str]:
    """Mutant names listed under the "Equivalent mutants" heading of docs/mutation.md."""
    doc = ROOT / "docs" / "mutation.md"
    if not doc.exists():
        return set()
    text = doc.read_text(encoding="utf-8")
    section = text.split("## Equivalent mutants", 1)[-1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `([\w.ǁ]+__mutmut_\d+)`", section, flags=re.MULTILINE))


def results() -> dict[str, dict[str, int | None]]:
    """Module -> mutant name -> mutmut's exit code (None: not run yet)."""
    found: dict[str, dict[str, int | None]] = {}
    for meta in sorted((ROOT / "mutants" / "converter").rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        if codes:
            module = meta.relative_to(ROOT / "mutants").with_suffix("").with_suffix("")
            found[module.as_posix() + ".py"] = codes
    return found


def main(argv: list[str]) -> int:
    equivalent = equivalent_mutants()
    total: Counter[str] = Counter()
    print(
        f"{'module':38} {'mutants':>7} {'killed':>6} {'surv.':>5} {'equiv.':>6} {'todo':>5}"
        f" {'score':>6} {'w/o eq.':>7}"
    )
    survivors = []
    for module, codes in results().items():
        counts: Counter[str] = Counter()
        for name, code in codes.items():
            if code is None:
                counts["todo"] += 1
            elif code in KILLED:
                counts["killed"] += 1
            elif name in equivalent:
                counts["equivalent"] += 1
            else:
                counts["survived"] += 1
                survivors.append(f"{name}: {SURVIVED.get(code, f'exit {code}')}")
        checked = len(codes) - counts["todo"]
        score = counts["killed"] / checked if checked else 0.0
        adjusted = counts["killed"] / (checked - counts["equivalent"]) if checked else 0.0
        print(
            f"{module:38} {len(codes):7} {counts['killed']:6} {counts['survived']:5} "
            f"{counts['equivalent']:6} {counts['todo']:5} {score:6.1%} {adjusted:7.1%}"
        )
        total.update(counts)
        total["mutants"] += len(codes)
    checked = total["mutants"] - total["todo"]
    if checked:
        print(
            f"{'all':38} {total['mutants']:7} {total['killed']:6} {total['survived']:5} "
            f"{total['equivalent']:6} {total['todo']:5} {total['killed'] / checked:6.1%} "
            f"{total['killed'] / (checked - total['equivalent']):7.1%}"
        )
    if "--survivors" in argv:
        print("\n".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
