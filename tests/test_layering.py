"""The import graph inside robench is acyclic and runs one way, counting imports inside functions and under
`if TYPE_CHECKING:` too (an annotation that names a higher layer is an upward dependency all the same).

The layers, lowest first (a module may import its own layer and the ones below, never above):
core <- data <- classifier <- training, engine <- the defences (`models/`) and recipes (`attacks/`) <- runs
<- report <- grid, bench, analysis <- cli <- the `robench` package itself (the public API).

Two packages of one layer (training and engine; grid, bench and analysis) may not import each other both ways:
the graph of packages (the first two dotted parts, `robench.engine`) has no cycle either. `attacks/` and
`models/` are walked as `robench.attacks` and `robench.models`, the names they install under.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"robench": ROOT / "robench", "robench.attacks": ROOT / "attacks", "robench.models": ROOT / "models"}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            if package == "robench" and parts and parts[0] in ("attacks", "models"):
                continue  # not a real location: they install from attacks/ and models/
            out[name] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str], type_checking: bool = True) -> set[str]:
    """What `module` imports, inside functions too; `type_checking` False leaves `if TYPE_CHECKING:` blocks out."""
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if not type_checking and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := resolve(alias.name)) is not None:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                target = resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in known else resolve(base)
                if target is not None:
                    found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return found


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    """Module -> the robench modules it imports; `type_checking` False: only the imports that run."""
    modules = _modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = _imports(tree, name, path.name == "__init__.py", known, type_checking)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if state.get(dep) is None and (cycle := dfs(dep)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := dfs(node)) is not None:
            return cycle
    return None


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto packages (the first two dotted parts: `robench.engine.victim` ->
    `robench.engine`); imports inside one package drop out."""
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        out.setdefault(package(module), set()).update(package(d) for d in deps)
    for name, deps in out.items():
        deps.discard(name)
    return out


def test_no_import_cycles():  # between modules, the imports that run (an annotation may name a sibling)
    cycle = find_cycle(import_graph(type_checking=False))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_package_cycles():
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "package cycle: " + " -> ".join(cycle)


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_package_cycle_finder_finds_a_cycle_of_modules_that_are_not_one():
    graph = {"robench.engine.resources.mlm": {"robench.training.backbones"}, "robench.training.backbones": set(),
             "robench.training.loop": {"robench.engine.victim"}, "robench.engine.victim": set()}
    assert find_cycle(graph) is None
    assert find_cycle(package_graph(graph)) == ["robench.engine", "robench.training", "robench.engine"]


def test_type_checking_and_function_imports_count():
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from robench.runs.spec import RunSpec\n"
              "def f():\n    from robench.engine import victim\n")
    known = {"robench.core.types", "robench.runs.spec", "robench.engine", "robench.engine.victim"}
    assert _imports(ast.parse(source), "robench.core.types", False, known) == \
        {"robench.runs.spec", "robench.engine.victim"}
    assert _imports(ast.parse(source), "robench.core.types", False, known, type_checking=False) == \
        {"robench.engine.victim"}
    graph = {"robench.core.types": _imports(ast.parse(source), "robench.core.types", False, known)}
    assert upward_imports(graph) == ["robench.core.types -> robench.engine.victim",
                                     "robench.core.types -> robench.runs.spec"]


def test_only_the_cli_uses_argparse():
    users = [name for name, path in _modules().items()
             if not name.startswith("robench.cli") and "argparse" in
             {a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import) for a in n.names}]
    assert users == []
    cli_importers = [name for name, deps in import_graph().items()
                     if not name.startswith("robench.cli") and any(d.startswith("robench.cli") for d in deps)]
    assert cli_importers == []


LAYERS: list[tuple[str, ...]] = [
    ("robench.core",), ("robench.data",), ("robench.classifier",), ("robench.training", "robench.engine"),
    ("robench.models", "robench.attacks"),
    ("robench.runs",), ("robench.report",), ("robench.grid", "robench.bench", "robench.analysis"), ("robench.cli",),
]


def layer_of(module: str) -> int:
    if module == "robench":
        return len(LAYERS)
    for level, group in enumerate(LAYERS):
        if any(module == g or module.startswith(g + ".") for g in group):
            return level
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in tests/test_layering.py")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return [f"{m} -> {d}" for m, deps in sorted(graph.items()) for d in sorted(deps) if layer_of(d) > layer_of(m)]


def test_imports_run_downwards_only():
    assert upward_imports(import_graph()) == []


def test_direction_check_finds_a_planted_upward_import():
    assert upward_imports({"robench.core.types": {"robench.runs.spec"}, "robench.cli": {"robench.core"}}) == \
        ["robench.core.types -> robench.runs.spec"]
    assert upward_imports({"robench.classifier.victim": {"robench.engine.attack"}}) == \
        ["robench.classifier.victim -> robench.engine.attack"]


def test_core_imports_no_torch():
    heavy = {"torch", "transformers"}
    users = [name for name, path in _modules().items() if name.startswith("robench.core") and
             heavy & {a.split(".")[0] for n in ast.walk(ast.parse(path.read_text()))
                      for a in ([x.name for x in n.names] if isinstance(n, ast.Import) else
                                [n.module or ""] if isinstance(n, ast.ImportFrom) else [])}]
    assert users == []


def test_no_module_outside_models_imports_a_defence():
    leaks = [f"{m} -> {d}" for m, deps in import_graph().items() if not m.startswith("robench.models")
             for d in deps if d.startswith("robench.models")]
    assert leaks == []  # e.g. BPDA is a hook the defence provides (`bpda_forward`), not an import of IM-BERT


def test_the_protocols_lower_layers_type_with_match_what_the_run_layer_hands_down():
    import dataclasses

    from robench.engine.attack import AttackedRun
    from robench.runs.resolve import ResolvedRun
    from robench.runs.spec import RunSpec
    from robench.training.loop import TrainingRun, TrainingSpec

    def members(protocol: type) -> set[str]:
        return {name for name, value in vars(protocol).items() if isinstance(value, property)}

    def fields(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    assert members(TrainingSpec) and members(TrainingSpec) <= fields(RunSpec)
    assert members(AttackedRun) and members(AttackedRun) <= fields(RunSpec)
    assert members(TrainingRun) and members(TrainingRun) <= fields(ResolvedRun)
