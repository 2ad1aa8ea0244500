"""Every file audee writes whole goes through ``audee/store/atomic.py`` (a reader never sees
half a file, a kill never leaves one): the package is read (``ast``, no import) for plain
whole-file writes, and only append-only logs, lock files and the named exceptions pass."""
from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "audee"

#: (file, function) -> why a plain write is right there; a whole file is named with function "*"
ALLOWED = {
    ("audee/store/atomic.py", "*"): "the atomic writer itself",
    ("audee/store/results.py", "repair"): "cuts the torn last line of the append-only results log in place",
    ("audee/store/lock.py", "*"): "a lock file: the holder's line rewritten under the lock, no data",
    ("audee/repro/template.py", "*"): "the standalone repro script's own code: it runs without audee",
}
WRITERS = {"savefig", "to_csv", "to_json", "to_parquet", "to_pickle", "to_excel", "savez", "savez_compressed",
           "tofile"}
DUMPERS = {"json", "pickle", "yaml", "marshal"}   # module.dump(obj, file)
BUFFERS = {"BytesIO", "StringIO"}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode string of an open() call, when it is a constant."""
    node = call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _file_arg(call: ast.Call, position: int, keywords: tuple[str, ...]) -> ast.AST | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg in keywords), None)


def _buffers(tree: ast.AST) -> set[str]:
    """Names that hold an in-memory file: ``x = io.BytesIO()``, and the parameters of a
    lambda handed to ``write_via`` (which writes its bytes atomically)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _name(node.value.func) in BUFFERS:
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.Call) and _name(node.func) == "write_via":
            for arg in node.args:
                if isinstance(arg, ast.Lambda):
                    out |= {a.arg for a in arg.args.args}
    return out


def plain_writes(source: str, path: str = "<string>") -> list[tuple[int, str, str]]:
    """(line, enclosing function, what) for every plain whole-file write in ``source``."""
    tree = ast.parse(source, path)
    buffers = _buffers(tree)
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                what = _plain_write(child, buffers)
                if what:
                    found.append((child.lineno, func, what))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def _plain_write(call: ast.Call, buffers: set[str]) -> str | None:
    f = call.func
    name = _name(f)
    if name in ("write_text", "write_bytes") and isinstance(f, ast.Attribute):
        return f".{name}()"
    if name == "open" or name == "fdopen":
        position = 0 if isinstance(f, ast.Attribute) and _name(f.value) not in ("io", "os") else 1
        mode = _mode(call, position)
        if mode is not None and "a" not in mode and any(c in mode for c in "wx+"):
            return f"open(..., {mode!r})"
        return None
    if name in WRITERS or (name == "save" and isinstance(f, ast.Attribute) and _name(f.value) in ("np", "numpy")):
        target = _file_arg(call, 0, ("fname", "file", "path_or_buf", "path", "fid"))
        if target is not None and not (isinstance(target, ast.Name) and target.id in buffers):
            return f"{name}(<a path>)"
        return None
    if name == "dump" and isinstance(f, ast.Attribute) and _name(f.value) in DUMPERS:
        target = _file_arg(call, 1, ("fp", "file", "stream"))
        if target is not None and not (isinstance(target, ast.Name) and target.id in buffers):
            return f"{_name(f.value)}.dump(<a file>)"
    return None


def package_files() -> list[Path]:
    """The package's modules; links (shipped data linked in) are not followed."""
    out = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [Path(folder) / f for f in files if f.endswith(".py")]
    return sorted(out)


def test_every_whole_file_write_is_atomic():
    bad = []
    for path in package_files():
        rel = path.relative_to(ROOT).as_posix()
        if (rel, "*") in ALLOWED:
            continue
        for line, func, what in plain_writes(path.read_text(encoding="utf-8"), rel):
            if (rel, func) not in ALLOWED:
                bad.append(f"{rel}:{line} ({func}): {what}")
    assert not bad, ("plain whole-file writes; use audee.store.atomic.write_atomic / write_via:\n"
                     + "\n".join(bad))


def test_the_check_sees_a_plain_write_and_passes_an_atomic_one():
    plain = '''
def f(out, df, fig, doc):
    (out / "a.md").write_text("x")
    with open(out / "b", "w") as fh:
        fh.write("x")
    df.to_csv(out / "c.csv")
    fig.savefig(out / "d.png")
    json.dump(doc, open(out / "e", "wb"))
'''
    whats = [w for _, _, w in plain_writes(plain)]
    assert whats == [".write_text()", "open(..., 'w')", "to_csv(<a path>)", "savefig(<a path>)",
                     "json.dump(<a file>)", "open(..., 'wb')"], whats
    atomic = '''
def f(out, df, fig, arrays):
    write_atomic(out / "c.csv", df.to_csv(index=False).encode())
    write_via(out / "d.png", lambda fh: fig.savefig(fh, format="png"))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    with open(out / "log", "ab") as fh:
        fh.write(b"x")
    with open(out / "in", "rb") as fh:
        fh.read()
'''
    assert plain_writes(atomic) == []


def test_create_atomic_writes_once(tmp_path):
    from audee.store.atomic import create_atomic, write_via

    assert create_atomic(tmp_path / "f.json", b"first") is True
    assert create_atomic(tmp_path / "f.json", b"second") is False
    assert (tmp_path / "f.json").read_bytes() == b"first"
    write_via(tmp_path / "g.bin", lambda fh: fh.write(b"abc"))
    assert (tmp_path / "g.bin").read_bytes() == b"abc"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json", "g.bin"]  # no temp file left
