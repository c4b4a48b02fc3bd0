"""Data flows one way between accelbench's packages: no package-level import cycle, and
nothing imports the CLI. Every import counts, also lazy ones inside functions and those
under TYPE_CHECKING, because each is a dependency all the same."""

from __future__ import annotations

import ast
from pathlib import Path

import accelbench

SRC = Path(accelbench.__file__).parent


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "accelbench" else None


def import_graph(root: Path = SRC) -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the files that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        pkg = rel.parts[0].removesuffix(".py")
        here = ["accelbench", *rel.with_suffix("").parts]
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this module's package
                    base = here[: len(here) - node.level]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
            for t in targets:
                dep = _package(t)
                if dep and dep != pkg and dep not in ("__init__", "__main__"):
                    graph.setdefault(pkg, {}).setdefault(dep, set()).add(str(rel))
        graph.setdefault(pkg, {})
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _describe(graph: dict[str, dict[str, set[str]]], comp: list[str]) -> str:
    edges = [
        f"{a} -> {b} ({', '.join(sorted(graph[a][b]))})"
        for a in comp
        for b in graph.get(a, {})
        if b in comp
    ]
    return "; ".join(edges)


def test_no_package_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "package import cycles: " + " | ".join(_describe(graph, c) for c in found)


def test_nothing_imports_the_cli() -> None:
    graph = import_graph()
    users = {
        p: sorted(deps["cli"])
        for p, deps in graph.items()
        if "cli" in deps and p not in ("cli", "__main__")  # `python -m accelbench` is the CLI
    }
    assert not users, f"only the CLI may depend on the CLI: {users}"


def test_the_guard_sees_a_cycle(tmp_path: Path) -> None:
    """The check itself can fail: two packages importing each other are reported."""
    for a, b in (("alpha", "beta"), ("beta", "alpha")):
        (tmp_path / a).mkdir()
        (tmp_path / a / "__init__.py").write_text("")
        (tmp_path / a / "m.py").write_text(f"def f():\n    from accelbench.{b}.m import f\n")
    (tmp_path / "gamma.py").write_text("from accelbench.alpha import m\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["alpha", "beta"]]
