"""The import rules of the package, checked on its source with ``ast`` (nothing is imported).

The data path runs one way: mechanisms (dpsgd, vi, mcmc, the baselines' release modules) read private
data and produce releases, whose types live in ``releases``; post-processing (noise_aware, validation,
plots, and the baselines' sampler modules) reads releases only; reports come last. Most packages are
one or the other as a whole; ``baselines`` holds both, so its modules are classified one by one
(:data:`POST_PROCESSING_MODULES`, :data:`MECHANISM_MODULES`). Every import counts, at module level or inside a function,
relative or absolute; ``from X import name`` is an import of the module ``X.name`` when that is a
module, else of ``X``.

Rules: no cycle between modules; no cycle between packages (a package is the first component under
``dpposterior``; a module directly under it is its own package); post-processing never imports the
data sets or a mechanism, and a mechanism never imports post-processing; ``releases`` imports no
mechanism, no post-processing and no modelling, data or reporting package; ``privacy`` imports no
modelling, releasing or reporting package; only the entry points import ``cli``.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
TOP = "dpposterior"

#: post-processing: reads releases, never data or a mechanism
POST_PROCESSING = ("noise_aware", "validation", "plots")
#: mechanisms: read private data
MECHANISMS = ("dpsgd", "vi", "mcmc")
#: post-processing modules inside a package that also holds mechanisms: the baselines' samplers, which
#: read a release only (the package's cells run a mechanism and then these, so they are neither)
POST_PROCESSING_MODULES = (
    f"{TOP}.baselines._chain",
    f"{TOP}.baselines._mixing",
    f"{TOP}.baselines.draws_posterior",
    f"{TOP}.baselines.expfam_gibbs",
    f"{TOP}.baselines.regression_gibbs",
    f"{TOP}.baselines.regression_params",
)
#: mechanism modules inside such a package: the baselines' releases, which read private records
MECHANISM_MODULES = (
    f"{TOP}.baselines.expfam_release",
    f"{TOP}.baselines.regression_release",
)
#: what releases (the released types, read by post-processing) may not import
RELEASES_FORBIDDEN = (
    MECHANISMS + POST_PROCESSING + ("models", "baselines", "datasets", "tabular", "experiments", "reproduce")
)
#: what privacy (accounting and noise) may not import
PRIVACY_FORBIDDEN = ("models", "vi", "noise_aware", "baselines", "tabular", "experiments", "reproduce")
#: the modules that may import dpposterior.cli
CLI_IMPORTERS = (f"{TOP}.cli", f"{TOP}.__main__")


@dataclasses.dataclass(frozen=True)
class Edge:
    """One import: ``source`` imports ``target`` at ``path:line`` with the statement ``text``."""

    source: str
    target: str
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}  ({self.path}:{self.line}: {self.text})"


def find_modules(src: Path, top: str = TOP) -> dict[str, Path]:
    """Module name -> file of every module of the package ``top`` under ``src``."""
    out = {}
    for path in sorted((src / top).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` if it is a module, else its longest prefix that is one (None outside the package)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """The package's modules that one import statement of ``module`` imports."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # ``from X import name``: the module X.name where there is one, else X
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules else prefix for a in node.names]
    found = (_known(n, modules) for n in names if n == TOP or n.startswith(TOP + "."))
    return sorted({t for t in found if t is not None})


def import_edges(src: Path = SRC, top: str = TOP) -> list[Edge]:
    """Every import between modules of the package, at module level and inside functions and classes."""
    modules = find_modules(src, top)
    edges = []
    for module, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        rel = path.relative_to(src.parent).as_posix() if src.parent in path.parents else str(path)
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, module, path.name == "__init__.py", modules):
                    if target != module:
                        edges.append(Edge(module, target, rel, node.lineno, lines[node.lineno - 1].strip()))
    return edges


def package_of(module: str) -> str | None:
    """The first component under the top package (None for the top package itself, the public facade
    that re-exports the packages and holds ``__version__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    nodes = sorted(set(graph) | {w for ws in graph.values() for w in ws})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.add(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def shortest_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle inside ``component`` (nodes in order, the first repeated at the end)."""
    best: list[str] = []
    for start in sorted(component):
        parent = {start: start}
        queue = [start]
        found = None
        while queue and found is None:
            nxt = []
            for v in queue:
                for w in sorted(graph.get(v, ())):
                    if w == start:
                        found = v
                        break
                    if w in component and w not in parent:
                        parent[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            queue = nxt
        if found is None:
            continue
        path = [found]
        while path[-1] != start:
            path.append(parent[path[-1]])
        cycle = path[::-1] + [start]
        if not best or len(cycle) < len(best):
            best = cycle
    return best


def _cycle_message(kind: str, component: set[str], cycle: list[str], lines) -> str:
    """The members of a cycle, and one shortest cycle through them with its import lines."""
    steps = "\n    ".join(line for a, b in zip(cycle, cycle[1:]) for line in lines(a, b))
    return f"{kind} cycle of {len(component)}: {sorted(component)}\n  e.g. {' -> '.join(cycle)}:\n    {steps}"


def module_cycles(edges: list[Edge]) -> list[str]:
    """One message per module cycle: its modules, and a shortest cycle among them with its import lines."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        graph[e.source].add(e.target)

    def lines(a: str, b: str) -> list[str]:
        return [str(e) for e in edges if e.source == a and e.target == b]

    return [_cycle_message("module", c, shortest_cycle(graph, c), lines) for c in strongly_connected(graph)]


def package_edges(edges: list[Edge]) -> list[tuple[str, str, Edge]]:
    """(source package, target package, import) of every import between two packages."""
    out = []
    for e in edges:
        a, b = package_of(e.source), package_of(e.target)
        if a is not None and b is not None and a != b:
            out.append((a, b, e))
    return out


def package_cycles(edges: list[Edge]) -> list[tuple[set[str], str]]:
    """(packages, message) per package cycle; the message names a shortest cycle among the packages and
    the imports that make each of its steps (at most three each)."""
    pairs = package_edges(edges)
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _ in pairs:
        graph[a].add(b)

    def lines(a: str, b: str) -> list[str]:
        return [str(e) for x, y, e in pairs if x == a and y == b][:3]

    return [(c, _cycle_message("package", c, shortest_cycle(graph, c), lines)) for c in strongly_connected(graph)]


def forbidden(edges: list[Edge], sources: tuple[str, ...], targets: tuple[str, ...]) -> list[Edge]:
    """The imports from a package of ``sources`` into a package of ``targets``."""
    return [e for a, b, e in package_edges(edges) if a in sources and b in targets]


def _is_post_processing(module: str) -> bool:
    return package_of(module) in POST_PROCESSING or module in POST_PROCESSING_MODULES


def _is_mechanism(module: str) -> bool:
    return package_of(module) in MECHANISMS or module in MECHANISM_MODULES


def crossing(edges: list[Edge], source, target) -> list[Edge]:
    """The imports from a module for which ``source(module)`` holds into one for which ``target(module)``
    holds, within a package as well as between packages (the baselines hold both sides)."""
    return [e for e in edges if source(e.source) and target(e.target)]


def _report(what: str, bad: list) -> str:
    return f"{what}:\n  " + "\n  ".join(str(b) for b in bad)


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return import_edges()


# ------------------------------------------------------------------------------ the rules


def test_no_module_cycle(edges):
    cycles = module_cycles(edges)
    assert not cycles, "\n".join(cycles)


def test_no_package_cycle(edges):
    cycles = [message for _, message in package_cycles(edges)]
    assert not cycles, "\n".join(cycles)


def test_post_processing_never_imports_the_data_sets(edges):
    bad = crossing(edges, _is_post_processing, lambda m: package_of(m) == "datasets")
    assert not bad, _report(
        f"post-processing ({', '.join(POST_PROCESSING + POST_PROCESSING_MODULES)}) imports datasets", bad
    )


def test_post_processing_imports_no_mechanism(edges):
    bad = crossing(edges, _is_post_processing, _is_mechanism)
    assert not bad, _report(
        f"post-processing ({', '.join(POST_PROCESSING + POST_PROCESSING_MODULES)}) imports a mechanism", bad
    )


def test_baselines_post_processing_imports_not_the_package(edges):
    """``dpposterior.baselines`` (its ``__init__``) re-exports the mechanisms: a sampler module that imported
    it would import them too."""
    bad = [e for e in edges if e.source in POST_PROCESSING_MODULES and e.target == f"{TOP}.baselines"]
    assert not bad, _report("a baselines post-processing module imports the baselines package", bad)


#: post-processing modules inside a mechanism's package, and the only modules each may import: they read
#: released samples and the public model, never the sampler, its settings or its accounting
INNER_POST_PROCESSING = {
    f"{TOP}.mcmc.dp_sgld.predictive": (f"{TOP}._checks", f"{TOP}.mcmc.dp_sgld.models"),
}


def test_inner_post_processing_imports_no_part_of_the_mechanism(edges):
    assert set(INNER_POST_PROCESSING) <= {e.source for e in edges}  # the modules exist: not a vacuous pass
    bad = [e for e in edges if e.source in INNER_POST_PROCESSING and e.target not in INNER_POST_PROCESSING[e.source]]
    assert not bad, _report("a post-processing module imports beyond the model it reads", bad)


def test_mechanisms_import_no_post_processing(edges):
    """A mechanism builds its release from the types in ``releases``; it needs no post-processing."""
    bad = crossing(edges, _is_mechanism, _is_post_processing)
    assert not bad, _report(f"a mechanism ({', '.join(MECHANISMS + MECHANISM_MODULES)}) imports post-processing", bad)


def test_classified_modules_exist(edges):
    """Every module named in the module-level classification is a module of the package (a renamed one
    would otherwise drop out of the rules silently)."""
    modules = find_modules(SRC)
    missing = [m for m in POST_PROCESSING_MODULES + MECHANISM_MODULES if m not in modules]
    assert not missing, f"classified modules not found: {missing}"


def test_releases_import_no_mechanism_post_processing_or_modelling(edges):
    bad = forbidden(edges, ("releases",), RELEASES_FORBIDDEN)
    assert not bad, _report(f"releases imports one of {', '.join(RELEASES_FORBIDDEN)}", bad)


def test_privacy_imports_no_modelling_releasing_or_reporting_package(edges):
    bad = forbidden(edges, ("privacy",), PRIVACY_FORBIDDEN)
    assert not bad, _report(f"privacy imports one of {', '.join(PRIVACY_FORBIDDEN)}", bad)


def test_only_the_entry_points_import_cli(edges):
    bad = [e for e in edges if e.target == f"{TOP}.cli" and e.source not in CLI_IMPORTERS]
    assert not bad, _report(f"only {', '.join(CLI_IMPORTERS)} may import {TOP}.cli", bad)


def test_every_module_is_parsed(edges):
    """The walk sees the package (a wrong root would check nothing and pass)."""
    modules = find_modules(SRC)
    assert len(modules) > 50 and f"{TOP}.privacy.ledger" in modules and f"{TOP}.cli" in modules
    assert {e.source for e in edges} >= {f"{TOP}.privacy.ledger", f"{TOP}.experiments.cell", f"{TOP}.releases.trace"}


# ------------------------------------------------------------------------------ the checker itself


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / TOP / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_checker_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    src = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/one.py": "from ..b.two import f\n",
            "b/__init__.py": "",
            "b/two.py": "def f():\n    from dpposterior.a import one\n",
        },
    )
    edges = import_edges(src)
    assert {(e.source, e.target) for e in edges} == {
        (f"{TOP}.a.one", f"{TOP}.b.two"),
        (f"{TOP}.b.two", f"{TOP}.a.one"),
    }
    [message] = module_cycles(edges)
    assert "a/one.py:1: from ..b.two import f" in message and "b/two.py:2: from dpposterior.a import one" in message
    [(packages, _)] = package_cycles(edges)
    assert packages == {"a", "b"}


def test_checker_finds_a_sampler_module_importing_a_release_module():
    edges = [
        Edge(
            f"{TOP}.baselines.expfam_gibbs",
            f"{TOP}.baselines.expfam_release",
            "p.py",
            1,
            "from . import expfam_release",
        ),
        Edge(f"{TOP}.baselines.cells", f"{TOP}.baselines.expfam_release", "c.py", 1, "from . import expfam_release"),
        Edge(f"{TOP}.noise_aware.x", f"{TOP}.vi.y", "n.py", 1, "from ..vi import y"),
    ]
    bad = crossing(edges, _is_post_processing, _is_mechanism)
    assert [(e.source, e.target) for e in bad] == [
        (f"{TOP}.baselines.expfam_gibbs", f"{TOP}.baselines.expfam_release"),
        (f"{TOP}.noise_aware.x", f"{TOP}.vi.y"),
    ]


def test_checker_resolves_names_and_packages(tmp_path):
    src = _tree(
        tmp_path,
        {
            "__init__.py": "__version__ = '1'\n",
            "p/__init__.py": "from . import m\nfrom .m import thing\n",
            "p/m.py": "from .. import __version__\nimport dpposterior.q.r\n",
            "q/__init__.py": "",
            "q/r.py": "import numpy\nfrom os import path\n",
        },
    )
    got = {(e.source, e.target) for e in import_edges(src)}
    assert got == {
        (f"{TOP}.p", f"{TOP}.p.m"),
        (f"{TOP}.p.m", TOP),
        (f"{TOP}.p.m", f"{TOP}.q.r"),
    }
