"""The layers contract: data flows one way through accelbench.

- no import cycle between packages, nor between the modules of one package;
- nothing imports the CLI;
- the pure packages (metrics, store, client, workload) never import runner, suites or
  report: they are what those build on;
- report imports no suite internals: only a suite's public view module
  (``accelbench.suites.<suite>.view``), the one place that renders that suite's section;
- only ``lifetime`` starts processes (docs/PROCESSES.md): no subprocess, os.fork/exec*/
  spawn*, asyncio subprocess or multiprocessing start anywhere else.

Every import counts, also lazy ones inside functions and those under TYPE_CHECKING,
because each is a dependency all the same."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import accelbench

SRC = Path(accelbench.__file__).parent

PURE = ("metrics", "store", "client", "workload")
UPPER = ("runner", "suites", "report")

# report -> suite internals that are there today (file, imported module). This set may
# only shrink: the report sections are moving into suites/<suite>/view.py, and once a
# line here no longer happens the test asks for it to be deleted, so nothing new is
# added behind it.
KNOWN_REPORT_SUITE_IMPORTS: frozenset[tuple[str, str]] = frozenset()

# The only places besides lifetime.py that may start a process, each with its reason.
PROCESS_STARTERS_ALLOWED: dict[str, str] = {
    "runner/workers.py": "Python load workers (multiprocessing): each calls "
    "lifetime.die_with_parent first thing",
    "suites/stress/mixed.py": "one multiprocessing child per endpoint: each calls "
    "lifetime.die_with_parent first thing",
}

# calls that start a process: module -> names (a name ending in "*" is a prefix)
_STARTERS: dict[str, tuple[str, ...]] = {
    "subprocess": (
        "Popen",
        "run",
        "call",
        "check_call",
        "check_output",
        "getoutput",
        "getstatusoutput",
    ),
    "os": ("fork", "forkpty", "exec*", "spawn*", "posix_spawn*", "system", "popen"),
    "asyncio": ("create_subprocess_*",),
    "asyncio.subprocess": ("create_subprocess_*",),
    "multiprocessing": ("Process", "Pool", "get_context"),
    "concurrent.futures": ("ProcessPoolExecutor",),
    "pty": ("fork", "spawn"),
}


@dataclass(frozen=True)
class Import:
    file: str  # relative to the accelbench package, e.g. "report/suites.py"
    module: str  # the importing module, e.g. "accelbench.report.suites"
    target: str  # the imported module (or the package a name was imported from)
    line: int


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["accelbench", *parts])


def _is_module(root: Path, module: str) -> bool:
    """Whether ``module`` (accelbench.x.y) is a module or package under ``root``."""
    parts = module.split(".")[1:]
    if not parts:
        return True
    base = root.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports(root: Path = SRC) -> list[Import]:
    """Every import of an accelbench module, resolved to the module it names: ``from
    accelbench.a import b`` is ``accelbench.a.b`` when that is a module, else
    ``accelbench.a``."""
    out: list[Import] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        here = _module_name(rel)
        pkg_parts = here.split(".") if rel.name == "__init__.py" else here.split(".")[:-1]
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this module's package
                    base = pkg_parts[: len(pkg_parts) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                for a in node.names:
                    sub = f"{mod}.{a.name}"
                    targets.append(sub if _is_module(root, sub) else mod)
            for t in targets:
                if t == "accelbench" or t.startswith("accelbench."):
                    out.append(Import(str(rel), here, t, node.lineno))
    return out


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "accelbench" else None


def import_graph(root: Path = SRC) -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the files that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in root.rglob("*.py"):
        graph.setdefault(path.relative_to(root).parts[0].removesuffix(".py"), {})
    for imp in imports(root):
        pkg, dep = _package(imp.module), _package(imp.target)
        if pkg and dep and dep != pkg and dep not in ("__init__", "__main__"):
            graph[pkg].setdefault(dep, set()).add(imp.file)
    return graph


def module_graph(root: Path = SRC) -> dict[str, dict[str, set[str]]]:
    """module -> imported module -> the lines (file:line) that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in root.rglob("*.py"):
        graph.setdefault(_module_name(path.relative_to(root)), {})
    for imp in imports(root):
        if imp.target != imp.module and imp.target in graph:
            graph[imp.module].setdefault(imp.target, set()).add(f"{imp.file}:{imp.line}")
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
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


def process_starts(root: Path = SRC) -> list[str]:
    """``file:line call`` for every call that starts a process, however the module or
    the name was imported (``import subprocess as sp``, ``from os import fork``), and
    for ``.Process(...)`` on a multiprocessing context."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root))
        tree = ast.parse(path.read_text(), str(path))
        modules: dict[str, str] = {}  # local name -> starter module
        names: dict[str, str] = {}  # local name -> "module.name"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in _STARTERS:  # `import concurrent.futures`: used dotted
                        modules[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for a in node.names:
                    if node.module in _STARTERS:
                        names[a.asname or a.name] = f"{node.module}.{a.name}"
                    elif f"{node.module}.{a.name}" in _STARTERS:
                        modules[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            full: str | None = None
            if isinstance(f, ast.Name):
                full = names.get(f.id)
            elif isinstance(f, ast.Attribute):
                base = ast.unparse(f.value)
                if base in modules:
                    full = f"{modules[base]}.{f.attr}"
                elif f.attr == "Process" and "get_context" in base:
                    found.append(f"{rel}:{node.lineno} multiprocessing.get_context().Process")
            if full is None:
                continue
            mod, _, name = full.rpartition(".")
            for pattern in _STARTERS.get(mod, ()):
                if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
                    found.append(f"{rel}:{node.lineno} {full}")
    return sorted(found, key=lambda f: (f.split(":")[0], int(f.split(":")[1].split(" ")[0])))


# -- the contract -------------------------------------------------------------------------


def test_no_package_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "package import cycles: " + " | ".join(_describe(graph, c) for c in found)


def test_no_module_cycles() -> None:
    """No circle between modules either, inside a package too: a lazy import that
    closes a circle is still a circle (the two modules cannot be understood, tested or
    moved one without the other)."""
    graph = module_graph()
    found = cycles(graph)
    assert not found, "module import cycles: " + " | ".join(_describe(graph, c) for c in found)


def test_nothing_imports_the_cli() -> None:
    graph = import_graph()
    users = {
        p: sorted(deps["cli"])
        for p, deps in graph.items()
        if "cli" in deps and p not in ("cli", "__main__")  # `python -m accelbench` is the CLI
    }
    assert not users, f"only the CLI may depend on the CLI: {users}"


def test_pure_packages_import_nothing_above_them() -> None:
    graph = import_graph()
    bad = {f"{p} -> {up}": sorted(graph[p][up]) for p in PURE for up in UPPER if up in graph[p]}
    assert not bad, f"the pure packages {PURE} may not import {UPPER}: {bad}"


def _report_suite_imports(root: Path = SRC) -> set[tuple[str, str]]:
    """report -> suites imports that are not a suite's public view module."""
    out = set()
    for imp in imports(root):
        if _package(imp.module) != "report" or _package(imp.target) != "suites":
            continue
        parts = imp.target.split(".")  # accelbench.suites.<suite>.view
        if not (len(parts) == 4 and parts[3] == "view"):
            out.add((imp.file, imp.target))
    return out


def test_report_imports_only_suite_views() -> None:
    found = _report_suite_imports()
    new = sorted(found - KNOWN_REPORT_SUITE_IMPORTS)
    gone = sorted(KNOWN_REPORT_SUITE_IMPORTS - found)
    assert not new, (
        "report may import from suites only accelbench.suites.<suite>.view "
        f"(render the section there): {new}"
    )
    assert not gone, f"fixed, so delete from KNOWN_REPORT_SUITE_IMPORTS: {gone}"


def test_only_lifetime_starts_processes() -> None:
    found = [
        f
        for f in process_starts()
        if not f.startswith("lifetime.py:") and f.split(":")[0] not in PROCESS_STARTERS_ALLOWED
    ]
    assert not found, (
        "start processes through accelbench.lifetime (spawn, run, guard; "
        f"docs/PROCESSES.md): {found}"
    )
    users = {f.split(":")[0] for f in process_starts()}
    stale = sorted(set(PROCESS_STARTERS_ALLOWED) - users)
    assert not stale, f"no longer start processes, so delete from PROCESS_STARTERS_ALLOWED: {stale}"


# -- the guards can fail ------------------------------------------------------------------


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(root).parents:
        if str(parent) != ".":
            (root / parent / "__init__.py").touch()
    path.write_text(text)


def test_the_guard_sees_a_cycle(tmp_path: Path) -> None:
    """The check itself can fail: two packages importing each other are reported."""
    for a, b in (("alpha", "beta"), ("beta", "alpha")):
        _write(tmp_path, f"{a}/m.py", f"def f():\n    from accelbench.{b}.m import f\n")
    _write(tmp_path, "gamma.py", "from accelbench.alpha import m\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["alpha", "beta"]]


def test_the_guard_sees_a_module_cycle(tmp_path: Path) -> None:
    """Two modules of one package that import each other, one lazily and relatively."""
    _write(tmp_path, "alpha/a.py", "from accelbench.alpha import b\n")
    _write(tmp_path, "alpha/b.py", "def f():\n    from .a import x\n")
    _write(tmp_path, "alpha/c.py", "from accelbench.alpha.a import y\n")
    assert cycles(import_graph(tmp_path)) == []
    assert cycles(module_graph(tmp_path)) == [["accelbench.alpha.a", "accelbench.alpha.b"]]


def test_the_guard_sees_a_report_reading_suite_internals(tmp_path: Path) -> None:
    _write(tmp_path, "suites/shadow/view.py", "")
    _write(tmp_path, "suites/shadow/store.py", "")
    _write(
        tmp_path,
        "report/r.py",
        "from accelbench.suites.shadow import view\n"
        "from accelbench.suites.shadow.view import render\n"
        "from accelbench.suites.shadow import store\n",
    )
    assert _report_suite_imports(tmp_path) == {("report/r.py", "accelbench.suites.shadow.store")}


def test_the_guard_sees_a_process_start(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "x.py",
        "import subprocess as sp\nimport os\nimport asyncio\nimport multiprocessing as mp\n"
        "from subprocess import check_output\nfrom concurrent.futures import "
        "ProcessPoolExecutor\nimport psutil\nimport concurrent.futures\n"
        "sp.run(['true'])\nos.execvp('true', [])\ncheck_output(['true'])\n"
        "asyncio.create_subprocess_exec('true')\nmp.get_context('spawn').Process()\n"
        "ProcessPoolExecutor()\n"
        "psutil.Process()\nos.getpid()\nsp.TimeoutExpired\n"
        "concurrent.futures.ProcessPoolExecutor()\nos.posix_spawnp('true', [], {})\n",
    )
    assert sorted(f.split(" ")[1] for f in process_starts(tmp_path)) == [
        "asyncio.create_subprocess_exec",
        "concurrent.futures.ProcessPoolExecutor",
        "concurrent.futures.ProcessPoolExecutor",
        "multiprocessing.get_context",
        "multiprocessing.get_context().Process",
        "os.execvp",
        "os.posix_spawnp",
        "subprocess.check_output",
        "subprocess.run",
    ]
