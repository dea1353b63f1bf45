"""The package's layers (tbconvert/__init__.py lists them): no import cycles, counting imports
made inside functions, and imports only go down the pipeline.

Read from the source with ``ast``: a lazy import (inside a function, for start-up time) is
still a dependency, and plain import-time checks would miss it.  Imports under
``if TYPE_CHECKING:`` count too: an annotation is a dependency a reader must follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tbconvert"
# Layer -> the layers it may import (its own included).  Two sides meet only in the store's
# schema: the write side (reading -> conversion -> writing) and the read side (query ->
# output); the CLI sits on both.
ALLOWED = {
    "vocabulary": {"vocabulary"},  # errors, filters, rows, urls, version, plugins.names
    "plugins": {"vocabulary", "plugins"},
    "reading": {"vocabulary", "plugins", "reading"},
    "store": {"vocabulary", "store"},
    "writing": {"vocabulary", "store", "writing"},
    "conversion": {"vocabulary", "plugins", "reading", "store", "writing", "conversion"},
    "query": {"vocabulary", "store", "query"},
    "output": {"vocabulary", "store", "query", "output"},
    # Pushing into another tracker (MLflow): the read side's, though it writes its own account
    # of what it sent (push_runs, push_marks) through the store's schema, never the writer.
    "push": {"vocabulary", "store", "query", "push"},
    "cli": {
        "vocabulary",
        "plugins",
        "reading",
        "store",
        "writing",
        "conversion",
        "query",
        "output",
        "push",
        "cli",
        "top",
    },
    "top": {"vocabulary", "conversion", "query", "top"},  # tbconvert/__init__.py
}
# The speed-only paths of reading/fast/ sit below the general path: they may use its parts
# (framing, CRCs, row buffers) but never the decoder or the file readers that call them.
ABOVE_FAST = {
    "tbconvert.reading.decoder",
    "tbconvert.reading.chunks",
    "tbconvert.reading.small_files",
    "tbconvert.reading.discovery",
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module in ("tbconvert", "tbconvert.__main__"):
        return "top" if module == "tbconvert" else "cli"
    first = parts[1]
    if (
        first in ("errors", "filters", "rows", "urls", "version")
        or module == "tbconvert.plugins.names"
    ):
        return "vocabulary"
    return first


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> set[str]:
    """Every tbconvert module that ``path`` imports, at any depth: in functions (lazily) and
    under ``if TYPE_CHECKING:`` (annotations) too, since both are dependencies a reader must
    follow, and a cycle hidden in either is a cycle all the same."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("tbconvert"))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("tbconvert")
        ):
            for alias in node.names:
                # ``from tbconvert.x import y``: y may be a module or a name in x.
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {module_name(path) for path in FILES}
GRAPH = {module_name(path): imports_of(path) for path in FILES}


def test_the_graph_is_read() -> None:
    # A sanity check of the pass itself: known edges, one of them a lazy import.
    assert "tbconvert.reading.decoder" in GRAPH["tbconvert.reading.chunks"]
    assert "tbconvert.reading.fast.block_scalars" in GRAPH["tbconvert.reading.decoder"]
    assert "tbconvert.conversion.pipeline" in GRAPH["tbconvert.cli.convert"]
    # An annotation-only import (under TYPE_CHECKING) is an edge too.
    assert "tbconvert.conversion.pipeline" in GRAPH["tbconvert"]


def test_no_import_cycles() -> None:
    # A module's package __init__ runs before it, but that is not an edge of the module's own.
    graph = {
        module: {target for target in targets if target in GRAPH and target != module}
        for module, targets in GRAPH.items()
    }
    visiting: list[str] = []
    done: set[str] = set()

    def walk(module: str) -> None:
        if module in done:
            return
        if module in visiting:
            cycle = [*visiting[visiting.index(module) :], module]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        visiting.append(module)
        for target in sorted(graph[module]):
            walk(target)
        visiting.pop()
        done.add(module)

    for module in sorted(graph):
        walk(module)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_go_down_the_layers(module: str) -> None:
    own = layer_of(module)
    wrong = sorted(
        target
        for target in GRAPH[module]
        if target in GRAPH and layer_of(target) not in ALLOWED[own]
    )
    assert not wrong, f"{module} ({own}) imports {wrong}"


@pytest.mark.parametrize(
    "module", sorted(m for m in GRAPH if m.startswith("tbconvert.reading.fast"))
)
def test_the_fast_paths_stay_below_the_general_path(module: str) -> None:
    assert not GRAPH[module] & ABOVE_FAST, f"{module} imports {GRAPH[module] & ABOVE_FAST}"


def test_the_reading_side_never_touches_a_database() -> None:
    for path in FILES:
        module = module_name(path)
        if layer_of(module) in ("reading", "plugins", "vocabulary"):
            source = path.read_text(encoding="utf-8")
            for banned in ("sqlalchemy", "alembic", "sqlite3", "psycopg"):
                assert f"import {banned}" not in source and f"from {banned}" not in source, (
                    module,
                    banned,
                )


# Lines past which a module is due a review (see the test below).
REVIEW_LINES = 500


def test_modules_stay_under_the_review_prompt() -> None:
    """A module over ``REVIEW_LINES`` lines fails.  The number is a prompt to review the
    module and split it along a seam (one role, one stage, one reason to change), not a
    budget: never compress prose or code to get under it."""
    long = {
        module_name(path): count
        for path in FILES
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > REVIEW_LINES
    }
    assert not long, long
