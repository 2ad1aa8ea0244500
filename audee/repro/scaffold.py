"""The one scaffold of every standalone repro script: what a model, an op call and a training
step script share, written once.

A script runs without audee, so whatever it shares is text: this module composes each
level's template from

* the scaffold: the header (a :class:`~audee.repro.source.Comment`), the data section and its
  check (the ``.npz`` beside the script holds exactly the arrays it was written with: names,
  shapes, dtypes, plain numbers, no entry larger than its array; checked before anything
  runs, in the parent and in every child, so bad data is never a verdict), the parent that
  runs one child process per backend (the script again, ``--backend NAME --out FILE``), and
  the exit-code contract: ``REPRODUCED`` exit 0, ``NOT REPRODUCED`` exit 1, a framework
  missing exit 2 (``ENVIRONMENT: ...``), bad data exit 3 (``BAD DATA: ...``);
* the level's body (its constants and five names: ``RUNS`` the backends it runs, ``TITLE``
  a line printed before the verdict or None, ``child(backend, out)`` the work in a child,
  ``read_result(out)`` what a child wrote, ``verdict(results)`` -> (reproduces, or None for
  no verdict; the rest of the verdict line));
* for model scripts, each built-in backend's own lines from its description
  (:class:`audee.backends.info.ScriptCode`), so no template names a backend.

The composed template keeps only the data placeholders (``__HEADER__``, ``__CASE__``, ...),
which the writers fill through :func:`audee.repro.source.fill`, the one way a value from a
case file reaches a script.
"""
from __future__ import annotations

import json
import textwrap

from audee.backends.info import BUILTIN_INFO, BackendInfo
from audee.repro.source import Code, fill

#: the exit codes every script keeps (its header says them)
EXIT_REPRODUCED, EXIT_NOT_REPRODUCED, EXIT_BROKEN, EXIT_BAD_DATA = 0, 1, 2, 3

#: a line every script composed here holds, as every one written before did: how ``audee
#: recheck`` knows a script keeps the exit codes above (REPRODUCED 0), not the ``findings/``
#: scripts' (REPRODUCED 1)
SCAFFOLD_MARK = "ENV_BROKEN = 2  # exit code"

_SCAFFOLD = r'''#!/usr/bin/env python3
# -*- coding: utf-8 -*-
__HEADER__
__DOC__import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

ENV_BROKEN = 2  # exit code: a framework cannot be imported (here or in a child)
BAD_DATA = 3    # exit code: the data file is missing or not the one written with this script

__CONSTANTS__
__DATA_SECTION__
__BACKEND_CODE__
__BODY__


# ---- one child process per backend, and the verdict ----------------------------------------------
def environment_broken(backend, exc):
    """A framework cannot be imported: said on stderr, exit ENV_BROKEN (the parent reports it)."""
    print(f"{backend}: cannot import a framework: {exc}", file=sys.stderr)
    sys.exit(ENV_BROKEN)


def write_result(path, /, **arrays):
    """A child's result, whole or not at all (written aside, then moved into place); the path
    is positional only, so an array may be called ``out`` (a training step's output is).  An
    array of a dtype NumPy does not know (ml_dtypes' bfloat16) is written as float32, exactly:
    saved as it is, it reads back as raw bytes."""
    arrays = {k: np.asarray(v).astype(np.float32) if np.asarray(v).dtype.kind == "V" else v for k, v in arrays.items()}
    np.savez(path + ".tmp.npz", **arrays)
    os.replace(path + ".tmp.npz", path)


def run_all(labels, timeout=None):
    """Each backend in its own process (this script again, ``--backend NAME --out FILE``): what
    it wrote (``read_result``), else how it failed: ``broken`` (a framework cannot be imported),
    ``bad_data`` (the data file changed), ``died`` (nothing written).  Every entry carries the
    child's ``exit`` code and the ``tail`` of its stderr."""
    results = {}
    for backend in labels:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.npz")
            cmd = [sys.executable, os.path.abspath(__file__), "--backend", backend, "--out", out]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                results[backend] = {"died": f"timed out after {timeout} s", "exit": None, "tail": ""}
                continue
            if p.returncode == ENV_BROKEN:
                results[backend] = {"broken": (p.stderr.strip().splitlines() or ["?"])[-1]}
            elif p.returncode == BAD_DATA and DATA is not None:
                results[backend] = {"bad_data": (p.stdout.strip().splitlines() or ["?"])[0]}
            elif not os.path.exists(out):
                how = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exited with code {p.returncode}"
                results[backend] = {"died": how}
            else:
                results[backend] = read_result(out)
            results[backend].update(exit=p.returncode, tail=p.stderr[-1500:])
    return results


def main():
    problem = check_data() if DATA is not None else None  # first: bad data is never a verdict
    if problem is not None:
        return bad_data(problem)
    if "--backend" in sys.argv:
        child(sys.argv[sys.argv.index("--backend") + 1], sys.argv[sys.argv.index("--out") + 1])
        return 0
    results = run_all(RUNS, CASE.get("timeout"))
    changed = [r["bad_data"] for r in results.values() if "bad_data" in r]
    if changed:  # the file changed while the backends ran
        return bad_data(changed[0].split(": ", 2)[-1])
    broken = {b: r["broken"] for b, r in results.items() if "broken" in r}
    if TITLE:
        print(TITLE)
    if broken:
        print("ENVIRONMENT: " + "; ".join(broken.values()))
        return ENV_BROKEN
    hit, rest = verdict(results)
    if hit is None:  # no verdict: what it needs did not run (said by the verdict)
        return ENV_BROKEN
    print(("REPRODUCED" if hit else "NOT REPRODUCED") + rest)
    return 0 if hit else 1


if __name__ == "__main__":
    sys.exit(main())
'''

_DATA_SECTION = r'''DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), json.loads(__DATA__))


# ---- the data file, checked before anything runs ------------------------------------------------
def check_data():
    """None when DATA holds exactly the arrays this script was written with (CASE["data"]:
    names, shapes, dtypes; plain numbers, no pickled objects), else what is wrong."""
    want = CASE["data"]
    if not os.path.exists(DATA):
        return "missing: keep it next to this script"
    try:
        with zipfile.ZipFile(DATA) as zf:
            members = {info.filename: info for info in zf.infolist()}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        return f"not a readable .npz file ({type(exc).__name__}: {exc})"
    extra = sorted(set(members) - {key + ".npy" for key in want})
    if extra:
        return f"holds entries this script was not written with: {', '.join(extra[:4])}"
    for key, (shape, dtype) in want.items():
        info = members.get(key + ".npy")
        if info is None:
            return f"no array {key!r}"
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if info.file_size > size + 65536:  # the .npy header is small: anything more is not this array
            return f"{key}: {info.file_size} bytes where {size} are expected"
    key = "the file"
    try:
        with np.load(DATA, allow_pickle=False) as z:
            for key, (shape, dtype) in want.items():
                got = z[key]
                if list(got.shape) != list(shape) or str(got.dtype) != dtype:
                    return f"{key}: {got.dtype} {list(got.shape)} where {dtype} {list(shape)} is expected"
    except Exception as exc:  # a truncated or corrupt entry, a pickled object array
        return f"{key}: cannot be read ({type(exc).__name__}: {exc})"
    return None


def bad_data(problem):
    """Say that the data is bad, and no verdict; the exit code."""
    print(f"BAD DATA: {os.path.basename(DATA)}: {problem}")
    print("No verdict: this script needs the weights and inputs it was written with beside it "
          "(write them again with `audee repro`, or copy the original file)")
    return BAD_DATA
'''

_NO_DATA = '''DATA = None  # no data file: everything the script needs is in it
'''


def _function(name: str, args: str, body: str) -> str:
    return f"def {name}({args}):\n{textwrap.indent(body.strip(), '    ')}\n"


def backend_code(infos: list[BackendInfo] | None = None) -> str:
    """The backends' section of a model script: each backend's helpers (once), its ``run``
    and ``gpu`` functions (one per distinct text), and ``BACKEND_CODE``, which the script's
    child reads by backend name (Keras backend, modules whose versions it prints, environment,
    GPU math switch, run).  ``infos``: every built-in backend that has script code."""
    infos = [i for i in (infos if infos is not None else BUILTIN_INFO.values()) if i.script is not None]
    helpers: list[str] = []
    defs: dict[tuple[str, str], str] = {}   # (arguments, body) -> the function's name
    table: list[str] = []
    for info in infos:
        code = info.script
        assert code is not None
        helpers += [h.strip() + "\n" for h in code.helpers if h.strip() + "\n" not in helpers]
        ident = info.name.replace("-", "_")
        names = {}
        for kind, args, body in (("run", "keras, model, spec, xs, at", code.run), ("gpu", "full", code.gpu)):
            if body is None:
                names[kind] = "None"
                continue
            names[kind] = defs.setdefault((args, body), f"{kind}_{ident}")
        table.append(f"    {json.dumps(info.name)}: {{\"keras\": {json.dumps(info.keras_backend or info.name)}, "
                     f"\"modules\": {json.dumps(list(info.modules or (info.name,)))}, "
                     f"\"env\": {json.dumps(dict(code.env))},\n"
                     f"        \"gpu\": {names['gpu']}, \"run\": {names['run']}}},")
    funcs = [_function(name, args, body) for (args, body), name in defs.items()]
    return ("\n# ---- each backend's own lines (audee's description of it): convert and run the built model ----\n"
            + "\n\n".join(helpers + funcs)
            + "\n\n# backend -> its Keras backend, the modules whose versions are printed, its environment,\n"
            "# its GPU math switch (full float32 or TF32) and its run\n"
            "BACKEND_CODE = {\n" + "\n".join(table) + "\n}\n")


def compose(*, constants: str, body: str, data: bool, backends: bool = False, doc: str = "") -> str:
    """A level's script template: the scaffold around the level's ``constants`` and ``body``,
    with the data section when the script has a ``.npz`` beside it (its name is ``__DATA__``,
    its manifest ``CASE["data"]``) and, for model scripts, every built-in backend's code.
    Only data placeholders are left, for :func:`audee.repro.source.fill`."""
    return fill(_SCAFFOLD, {
        "HEADER": Code("__HEADER__"),
        "DOC": Code(f'"""{doc}"""\n' if doc else ""),
        "CONSTANTS": Code(constants.strip() + "\n"),
        "DATA_SECTION": Code(_DATA_SECTION if data else _NO_DATA),
        "BACKEND_CODE": Code(backend_code() if backends else ""),
        "BODY": Code(body.strip("\n") + "\n"),
    })
