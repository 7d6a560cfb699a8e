"""The docs run (issue 59): every `robench ...` command line of the README and docs/guide parses with the real parser,
and every Python block compiles, imports what it names, calls what it names with arguments its signature takes, and
uses no name it neither defines nor imports (beyond the user's own objects the prose names). The blocks that need
no data run whole."""
from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import functools
import importlib
import inspect
import io
import re
import runpy
import shlex
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

from robench.cli import build_parser, parse
from robench.cli.markdown import PAGES as GENERATED

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.md"))]
WRITTEN = [page for page in PAGES if page.name not in {p.name for p in GENERATED}]  # the CLI reference is the parser's
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)
SHELL = {"", "bash", "sh", "console", "shell"}
# Names a block may use without defining them: the user's own objects, named in the prose around the block.
USERS_OWN = {"model", "tokenizer", "predict", "res", "params", "tags"}
RUN_WHOLE = {("plugins.md", 0), ("engine.md", 1)}  # (page, index of its Python block): need no data, run whole


@dataclass(frozen=True)
class Block:
    page: str
    index: int  # among the page's Python blocks
    code: str

    def __str__(self) -> str:
        return f"{self.page}#py{self.index}"


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def python_blocks() -> list[Block]:
    found = []
    for page in PAGES:
        code = [text for lang, text in _blocks(page) if lang == "python"]
        found += [Block(page.name, i, text) for i, text in enumerate(code)]
    return found


def _shell_lines(text: str) -> list[str]:
    """The lines of a shell block that run robench (not the output a block may show)."""
    lines = text.replace("\\\n", " ").splitlines()
    return [line for line in lines if re.match(r"\s*([A-Z_][A-Z0-9_]*=\S*\s+)*robench\s", line)
            or re.search(r"(&&|\|\||;|\|)\s*robench\s", line)]


def _commands(line: str) -> list[list[str]]:
    """The `robench` invocations of one shell line: split at `&&`, `||`, `;` and `|`, env assignments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    words, commands, current = list(lexer), [], []
    for word in [*words, ";"]:
        if word in {"&&", "||", ";", "|", "&"}:
            while current and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", current[0]):
                current.pop(0)
            if current[:1] == ["robench"]:
                commands.append(current[1:])
            current = []
        else:
            current.append(word)
    return commands


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()


def _command_path(argv: list[str]) -> list[str]:
    """The leading words of `argv` that name a (sub-)command: `resources build-mlm` of `resources build-mlm --force`."""
    parser, path = _parser(), []
    for word in argv:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            break
        parser = sub.choices[word]
        path.append(word)
    return path


def command_lines() -> list[tuple[str, list[str]]]:
    """(page, argv) of every `robench ...` line in a shell block, and of every inline `robench ...` code span that
    is a command line: a span that only names a command (`robench grid`) is checked by name below."""
    found = []
    for page in WRITTEN:
        text = page.read_text(encoding="utf-8")
        for lang, block in _blocks(page):
            if lang in SHELL:
                found += [(page.name, argv) for line in _shell_lines(block) for argv in _commands(line)]
        prose = FENCE.sub("", text)
        spans = [argv for span in re.findall(r"`(robench [^`]+)`", prose) for argv in _commands(span)]
        found += [(page.name, argv) for argv in spans if 0 < len(_command_path(argv)) < len(argv)]
    return found


def command_names() -> list[tuple[str, list[str]]]:
    """(page, words) of every inline `robench ...` code span (`robench resources list`, `robench run: error: ...`)."""
    found = []
    for page in WRITTEN:
        prose = FENCE.sub("", page.read_text(encoding="utf-8"))
        found += [(page.name, span.split()[1:]) for span in re.findall(r"`(robench [^`]+)`", prose)]
    return found


COMMANDS = command_lines()


@pytest.mark.parametrize("page, argv", COMMANDS, ids=[f"{p}:{' '.join(a)}"[:90] for p, a in COMMANDS])
def test_every_command_line_parses_with_the_real_parser(page, argv):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            parse(argv)
        except SystemExit as exc:
            pytest.fail(f"{page}: `robench {' '.join(argv)}` does not parse (exit {exc.code}): {stderr.getvalue()}")


def test_every_command_named_in_prose_exists():
    for page, words in command_names():
        assert _command_path([words[0].rstrip(":")]), f"{page}: `robench {' '.join(words)}` names no command"


def test_the_extractor_finds_commands_in_blocks_chains_and_prose():
    assert _commands("ROBENCH_DATA_DIR=x robench run --model bert && robench show ID  # a comment") == [
        ["run", "--model", "bert"], ["show", "ID"]]
    assert _commands("make demo") == []
    assert len(COMMANDS) > 60
    assert {"README.md", "grid.md", "resources.md", "analysis.md"} <= {page for page, _ in COMMANDS}
    assert _command_path(["resources", "build-mlm", "--force"]) == ["resources", "build-mlm"]


def _imports(tree: ast.Module) -> dict[str, object]:
    """Run the block's imports (each must succeed): the names they bind, with their objects."""
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module = importlib.import_module(alias.name)
                names[alias.asname or alias.name.split(".")[0]] = module if alias.asname else \
                    importlib.import_module(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if value is None:  # a submodule: `from robench.engine import resources`
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                names[alias.asname or alias.name] = value
    return names


def _resolve(node: ast.expr, names: dict[str, object]) -> object | None:
    """The object an expression of names and attributes stands for, when it starts at an imported name."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, names)
        if owner is not None and inspect.ismodule(owner):
            assert hasattr(owner, node.attr), f"{owner.__name__} has no {node.attr!r}"
            return getattr(owner, node.attr)
    return None


def _check_calls(tree: ast.Module, names: dict[str, object]) -> None:
    """Every attribute of an imported module exists, and every call of an imported callable fits its signature."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            _resolve(node, names)
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        target = _resolve(node.func, names)
        if target is None or not callable(target):
            continue
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            continue
        keywords = {k.arg: None for k in node.keywords if k.arg is not None}
        try:
            signature.bind(*[None] * len(node.args), **keywords)
        except TypeError as exc:
            raise AssertionError(f"{ast.unparse(node.func)}({', '.join(keywords)}): {exc}") from None


def _free_names(tree: ast.Module) -> set[str]:
    """Names the block reads but never binds (imports, assignments, definitions, parameters, comprehensions)."""
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - bound


BLOCKS = python_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_every_python_block_imports_and_calls_what_it_names(block):
    tree = ast.parse(block.code, filename=str(block))
    names = _imports(tree)
    _check_calls(tree, names)
    assert _free_names(tree) <= USERS_OWN, f"{block}: names neither defined nor imported"


@pytest.mark.parametrize("block", [b for b in BLOCKS if (b.page, b.index) in RUN_WHOLE], ids=str)
def test_a_block_that_needs_no_data_runs_whole(block, tmp_path):
    script = tmp_path / f"{block.page.replace('.', '_')}_{block.index}.py"
    script.write_text(block.code, encoding="utf-8")
    namespace = runpy.run_path(str(script))
    if block.page == "engine.md":  # the example search asks one prediction and returns its outcome
        search = namespace["search"](("a fine film",), 1, None)
        request = next(search)
        with pytest.raises(StopIteration) as done:
            search.send([[0.9, 0.1]])
        assert request.kind == "predict" and done.value.value.text == ("a fine film !",)
    if block.page == "plugins.md":
        assert namespace["EXAMPLE"].name == "example"


ENTRY_POINT_GROUPS = {"robench.models", "robench.attacks", "robench.tasks"}  # plugin groups, not modules


PACKAGE_DIRS = {("robench", "models"): "models", ("robench", "attacks"): "attacks", ("robench", "results"): "results"}


def _module_file(parts: list[str]) -> Path | None:
    """The source file of a dotted module name (robench.attacks is the attacks/ folder: pyproject's package-dir)."""
    folder = PACKAGE_DIRS.get(tuple(parts[:2]))
    path = REPO.joinpath(folder, *parts[2:]) if folder else REPO.joinpath(*parts)
    return next((f for f in (path / "__init__.py", path.with_suffix(".py")) if f.is_file()), None)


def _top_level_names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({n.id: node for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)})
    return names


def _in_lazy_all(body: list[ast.stmt], name: str) -> bool:
    """A module with a `__getattr__` (robench's lazy API) exports what its `__all__` lists."""
    for node in body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return name in ast.literal_eval(node.value)
    return False


def _resolves(dotted: str) -> bool:
    """A dotted name is a module of this repository, or a name its source defines (a class's own names too),
    read from the source without importing anything."""
    parts = dotted.split(".")
    cut = next((c for c in range(len(parts), 0, -1) if _module_file(parts[:c])), 0)
    if not cut:
        return False
    body = ast.parse(_module_file(parts[:cut]).read_text(encoding="utf-8")).body
    for name in parts[cut:]:
        names = _top_level_names(body)
        node = names.get(name)
        if node is None:
            return _in_lazy_all(body, name) if "__getattr__" in names else False
        if not isinstance(node, ast.ClassDef):
            return True  # an attribute of a function's or a value's result: not checked further
        body = node.body
    return True


def test_every_module_path_and_dotted_name_in_the_guides_exists():
    """`robench/engine/words.py`, `robench.data.loading.subset`: what the prose names in code spans is there."""
    stale = []
    for page in WRITTEN:
        spans = " ".join(re.findall(r"`([^`\n]+)`", FENCE.sub("", page.read_text(encoding="utf-8"))))
        paths = re.findall(r"\b((?:robench|attacks|models|studies|tests|examples)/[\w/.-]+\.(?:py|toml|j2))\b", spans)
        stale += [f"{page.name}: {path}" for path in paths if not (REPO / path).exists()]
        names = set(re.findall(r"\b((?:robench|attacks|models)(?:\.[A-Za-z_]\w*)+)", spans)) - ENTRY_POINT_GROUPS
        stale += [f"{page.name}: {name}" for name in sorted(names) if not name.endswith(".md") and not _resolves(name)]
    assert stale == []


def _prose(script: Path) -> str:
    """A script's docstrings and comments: what it says in words about the code it calls."""
    source = script.read_text(encoding="utf-8")
    nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return "\n".join([ast.get_docstring(n) or "" for n in nodes] + comments)


def test_every_dotted_name_a_study_script_says_in_words_exists():
    """Their docstrings and comments name robench's code (`robench.engine.constraints.WordNetPos`): it is there."""
    stale = []
    for script in sorted((REPO / "studies").glob("*.py")):
        names = set(re.findall(r"\b((?:robench|attacks|models)(?:\.[A-Za-z_]\w*)+)\b", _prose(script)))
        stale += [f"{script.name}: {name}" for name in sorted(names)
                  if not re.search(r"\.(md|csv|jsonl?|toml|html|parquet|txt|py)$", name) and not _resolves(name)]
    assert stale == []


def test_the_checks_catch_a_stale_import_a_wrong_keyword_and_an_undefined_name():
    with pytest.raises(ImportError):
        _imports(ast.parse("from robench.engine.scheduler import resources"))
    tree = ast.parse("from robench import RunSpec\nRunSpec(modle='bert')")
    with pytest.raises(AssertionError, match="modle"):
        _check_calls(tree, _imports(tree))
    tree = ast.parse("import robench\nrobench.evaluat()")
    with pytest.raises(AssertionError, match="evaluat"):
        _check_calls(tree, _imports(tree))
    assert _free_names(ast.parse("from x import y\ny(z)")) == {"z"}
    assert not _resolves("robench.data.tasks.subset") and _resolves("robench.data.loading.subset")
    assert _resolves("robench.engine.resources") and _resolves("robench.runs.spec.RunSpec.run_id")
    assert len(BLOCKS) >= 5
