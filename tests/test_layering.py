"""Imports point down: every module of ``audee/`` imports only modules of its own layer or
of a lower one, in the layering ``docs/architecture.md`` declares (section "Layers"), and no
two modules import each other, directly or round a longer circle.

Pure Python (``ast``, no audee import): the doc is the one owner of the layering, so the test
reads the layers from it; imports inside functions count as much as those at the top, since
a deferred import is the same dependency taken later.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "audee"
DOC = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Import:
    """One import statement's target inside audee, where it stands."""

    source: str   # importing module, dotted
    target: str   # imported module, dotted
    where: str    # "audee/engine/execute.py:246"


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``).  os.walk
    does not follow symlinks: shipped data linked into the package is not code of it."""
    out: dict[str, Path] = {}
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = Path(folder) / f
                parts = path.relative_to(package.parent).with_suffix("").parts
                out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def layers() -> list[tuple[str, list[str]]]:
    """The doc's layers, lowest first: ``N. **name**: `mod`, `pkg/`, ... — why``."""
    text = DOC.read_text()
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    out = []
    for m in re.finditer(r"^\d+\. \*\*(?P<name>[^*]+)\*\*: (?P<names>.*?) — ", section, re.M):
        out.append((m.group("name"), re.findall(r"`([^`]+)`", m.group("names"))))
    assert out, f"{DOC}: no layers under '## Layers'"
    return out


def dotted(entry: str) -> tuple[str, bool]:
    """A doc entry as a dotted module and whether it names a whole package: ``apis/`` ->
    ("audee.apis", True), ``backends/registry`` -> ("audee.backends.registry", False),
    ``__init__`` -> ("audee", False)."""
    package = entry.endswith("/")
    parts = [p for p in entry.strip("/").split("/") if p != "__init__"]
    return ".".join(["audee", *parts]), package


def layer_of(mods: dict[str, Path]) -> dict[str, tuple[int, str]]:
    """Each module's (layer index, layer name): an entry naming the module wins over a
    package entry, the innermost package over an outer one (``pkg/__init__`` names the
    package's own module apart from its submodules, ``pkg/``)."""
    modules_named: dict[str, tuple[int, str]] = {}
    packages: dict[str, tuple[int, str]] = {}
    for i, (name, names) in enumerate(layers()):
        for entry in names:
            mod, package = dotted(entry)
            table = packages if package else modules_named
            assert mod not in table, f"{DOC}: {entry} is in two layers"
            assert mod in mods, f"{DOC}: layer {name!r} names {entry}, which is no module of audee/"
            table[mod] = (i, name)
    out = {}
    for mod in mods:
        if mod in modules_named:
            out[mod] = modules_named[mod]
            continue
        owners = [m for m in packages if mod == m or mod.startswith(m + ".")]
        if owners:
            out[mod] = packages[max(owners, key=len)]
    return out


def imports(mods: dict[str, Path], root: Path = ROOT) -> list[Import]:
    """Every import of an audee module by an audee module, at any depth of the code.
    ``from pkg import sub`` is an import of ``pkg.sub`` where that is a module."""
    found = []
    for mod, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_package else mod.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    where = ".".join(base + ([node.module] if node.module else []))
                else:
                    where = node.module or ""
                subs = [f"{where}.{a.name}" for a in node.names if f"{where}.{a.name}" in mods]
                targets = subs + ([where] if len(subs) < len(node.names) else [])
            for target in targets:
                if target != "audee" and not target.startswith("audee."):
                    continue
                while target not in mods and "." in target:  # a name inside a module: the module
                    target = target.rsplit(".", 1)[0]
                if target != mod:
                    found.append(Import(mod, target, f"{path.relative_to(root)}:{node.lineno}"))
    return found


def cycles(edges: list[Import]) -> list[list[str]]:
    """Groups of modules that reach each other through imports (Tarjan's strongly
    connected components larger than one module)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    mods = modules()
    placed = layer_of(mods)
    missing = sorted(set(mods) - set(placed))
    assert not missing, f"modules in no layer of {DOC.relative_to(ROOT)} (section Layers): {', '.join(missing)}"


def test_imports_point_down_the_layers():
    mods = modules()
    placed = layer_of(mods)
    upward = []
    for e in imports(mods):
        if e.source in placed and e.target in placed and placed[e.target][0] > placed[e.source][0]:
            upward.append(f"{e.where}: {e.source} (layer {placed[e.source][1]}) imports {e.target} "
                          f"(layer {placed[e.target][1]}, above it)")
    assert not upward, "imports against the layering of docs/architecture.md:\n" + "\n".join(upward)


def test_no_two_modules_import_each_other():
    edges = imports(modules())
    found = cycles(edges)
    lines = []
    for group in found:
        inside = [f"{e.where}: {e.source} -> {e.target}" for e in edges if e.source in group and e.target in group]
        lines.append(" <-> ".join(group) + "\n  " + "\n  ".join(inside))
    assert not found, "modules that import each other:\n" + "\n".join(lines)


def test_the_checker_sees_deferred_relative_and_circular_imports(tmp_path):
    """The checks themselves, on a package made here: an import inside a function counts,
    ``from pkg import sub`` is an import of the submodule, relative imports resolve, and a
    circle of three is one group."""
    pkg = tmp_path / "audee"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .low import x\n")
    (pkg / "sub" / "low.py").write_text("import numpy\nx = 1\n\ndef f():\n    from audee import cli\n")
    (pkg / "cli.py").write_text("from audee.sub import low\nfrom audee.sub.low import x\n")
    mods = modules(pkg)
    assert set(mods) == {"audee", "audee.sub", "audee.sub.low", "audee.cli"}
    got = {(e.source, e.target, e.where) for e in imports(mods, tmp_path)}
    assert got == {("audee.sub", "audee.sub.low", "audee/sub/__init__.py:1"),
                   ("audee.sub.low", "audee.cli", "audee/sub/low.py:5"),
                   ("audee.cli", "audee.sub.low", "audee/cli.py:1"), ("audee.cli", "audee.sub.low", "audee/cli.py:2")}
    assert cycles(imports(mods, tmp_path)) == [["audee.cli", "audee.sub.low"]]
    ring = [Import("a", "b", "a:1"), Import("b", "c", "b:1"), Import("c", "a", "c:1"), Import("c", "d", "c:2")]
    assert cycles(ring) == [["a", "b", "c"]]
    assert dotted("apis/") == ("audee.apis", True) and dotted("__init__") == ("audee", False)
    assert dotted("localize/__main__") == ("audee.localize.__main__", False)


LEVELS = PACKAGE / "levels"
LEVEL_INSPECTION = re.compile(r'is_op\b|phase"\) == "train"|startswith\("op:"\)|_training_case')


def level_packages(package: Path = PACKAGE) -> list[str]:
    """The case levels' packages (``audee.levels.<name>``: a folder with an ``__init__``)."""
    base = package / "levels"
    return sorted(f"audee.levels.{d.name}" for d in base.iterdir() if (d / "__init__.py").is_file())


def test_no_module_outside_a_level_imports_it():
    """A level is found through its registry (``audee.levels``: it imports the package by
    name when asked for), never imported by another module: a new level is its package and
    one registry line (docs/architecture.md, Layers)."""
    mods = modules()
    levels = level_packages()
    assert levels, f"no level packages under {LEVELS}"
    bad = [f"{e.where}: {e.source} imports {e.target}" for e in imports(mods) for lv in levels
           if (e.target == lv or e.target.startswith(lv + ".")) and not (e.source == lv or
                                                                          e.source.startswith(lv + "."))]
    assert not bad, "modules importing a level's package (ask audee.levels instead):\n" + "\n".join(bad)


def test_every_registered_level_is_a_package_and_every_package_registered():
    registry = (LEVELS / "__init__.py").read_text()
    named = set(re.findall(r'Entry\("[^"]+", "(audee\.levels\.[a-z_]+)"', registry))
    assert named == set(level_packages()), (named, level_packages())


def test_no_module_outside_the_levels_inspects_a_case_for_its_level():
    """Which wing a case belongs to is the registry's answer (``level_of``, ``level_name``,
    ``source_name``), not an ``if`` on the record in each command."""
    found = []
    for mod, path in modules().items():
        if mod == "audee.levels" or mod.startswith("audee.levels."):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if LEVEL_INSPECTION.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "level inspected outside audee/levels:\n" + "\n".join(found)


# The only modules at the top of audee/: the entry points and the three one-module rooms. Every other
# module lives in the folder of its layer, so the tree itself shows the layering.
TOP_LEVEL_MODULES = {"audee", "audee.__main__", "audee.settings", "audee.fuzz", "audee.cli"}
# Modules that sit in a folder of another layer, each for a reason the doc gives: the one atomic write
# beside the store it serves, a backend's description and names (plain data the judgement reads) beside
# the backends, the level registry and protocols (vocabulary) beside the levels, an entry point.
OUT_OF_FOLDER = {"audee.store.atomic", "audee.backends.info", "audee.backends.registry", "audee.levels",
                 "audee.levels.base", "audee.localize.__main__"}


def test_the_folders_show_the_layers():
    mods = modules()
    top = {m for m, path in mods.items() if path.parent == PACKAGE}
    assert top == TOP_LEVEL_MODULES, (
        f"modules at the top of audee/ beside the entry points and settings/fuzz/cli: "
        f"{', '.join(sorted(top - TOP_LEVEL_MODULES)) or '-'} (put each in the folder of its layer, "
        f"docs/architecture.md 'Layers'); missing: {', '.join(sorted(TOP_LEVEL_MODULES - top)) or '-'}")
    folder_layer: dict[str, str] = {}
    for name, names in layers():
        for entry in names:
            if entry.endswith("/") and entry.count("/") == 1:
                folder_layer[entry.rstrip("/")] = name
    placed = layer_of(mods)
    strays = []
    for mod in mods:
        parts = mod.split(".")
        if len(parts) < 2 or parts[1] not in folder_layer or mod in OUT_OF_FOLDER:
            continue
        if placed[mod][1] != folder_layer[parts[1]]:
            strays.append(f"{mod} (layer {placed[mod][1]}, folder {parts[1]}/ is {folder_layer[parts[1]]})")
    assert not strays, "modules in the folder of another layer: " + ", ".join(strays)
