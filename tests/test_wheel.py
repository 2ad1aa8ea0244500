"""The wheel is the product: build it, install it into a fresh virtual environment with the
dependencies pip resolves for it (pinned by requirements.txt, so torch is the local CPU
build; the same versions as this environment's, linked rather than unpacked again, and no
other distribution), and run audee from outside the source tree, so only what the wheel
ships can be found.

It carries the ``wheel`` marker (a fuzz run and a venv: about a minute on 2 cores): ``make
test`` leaves it out, ``make test-wheel`` (run by .ci/run after ``make test``) runs it.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import audee

ROOT = Path(__file__).resolve().parent.parent
# seeds/ and api_configs/ are linked into the package (audee/data/): copied as links, so the
# build follows them as it does in a checkout
SOURCES = ["audee", "seeds", "api_configs", "setup.cfg", "pyproject.toml", "README.md", "MANIFEST.in", "LICENSE",
           "setup.py"]


def _canonical(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.mark.wheel
def test_wheel_installs_into_a_fresh_venv_and_runs_outside_the_source_tree(tmp_path):
    t0 = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    # a copy of what the wheel is built from: the build never sees (or leaves) build/ in the checkout
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif p.is_file():
            shutil.copy2(p, src / name)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), "."],
         src, env)
    wheels = list(dist.glob("audee-*.whl"))
    assert [w.name for w in wheels] == [f"audee-{audee.__version__}-py3-none-any.whl"]
    assert (src / "audee" / "data" / "seeds").is_symlink()
    with zipfile.ZipFile(wheels[0]) as whl:  # the files the links point to, as plain files
        names = set(whl.namelist())
        links = [i.filename for i in whl.infolist() if (i.external_attr >> 16) & 0o170000 == 0o120000]
    for shipped in ("audee/data/seeds/lenet5/spec.json", "audee/data/seeds/lenet5/weights.npz",
                    "audee/data/seeds/README.md", "audee/data/api_configs/Conv2D.yaml",
                    "audee/data/api_configs/README.md", "audee/data/known_issues.yaml"):
        assert shipped in names, shipped
    assert not links, links

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    py, exe = venv / "bin" / "python", venv / "bin" / "audee"
    pip = [sys.executable, "-m", "pip", "--python", str(py)]   # this pip, on the empty venv
    # what pip installs with the wheel, its dependencies and extras held to the pins (an unpinned
    # torch would pull a CUDA build), resolved by pip for the fresh venv ...
    report = tmp_path / "resolved.json"
    _run([*pip, "install", "-q", "--dry-run", "--report", str(report),
          "-c", str(ROOT / "requirements.txt"), f"{wheels[0]}[torch,jax]"], tmp_path, env)
    resolved = {_canonical(i["metadata"]["name"]): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]}
    assert resolved.pop("audee") == audee.__version__
    # ... and nothing else: those this environment holds at the same version are linked (their
    # files, after the venv's own site-packages: unpacking the frameworks again took most of this
    # test's 1.5-2 minutes), the others installed, the wheel alone
    here = {_canonical(d.metadata["Name"]): d for d in importlib.metadata.distributions()}
    same = {name for name, version in resolved.items() if name in here and here[name].version == version}
    assert {"torch", "jax", "keras", "numpy"} <= same   # the frameworks are this environment's
    deps = tmp_path / "deps"
    deps.mkdir()
    for name in sorted(same):
        for top in {f.parts[0] for f in here[name].files or () if f.parts[0] != ".."}:
            if not (deps / top).exists():
                (deps / top).symlink_to(here[name].locate_file(top))
    purelib = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env)
    (Path(purelib.stdout.strip()) / "audee-deps.pth").write_text(f"{deps}\n")
    others = [f"{name}=={version}" for name, version in sorted(resolved.items()) if name not in same]
    _run([*pip, "install", "-q", "--no-deps", "--no-compile", str(wheels[0]), *others], tmp_path, env)
    listed = json.loads(_run([*pip, "list", "--format", "json"], tmp_path, env).stdout)
    assert {_canonical(d["name"]): d["version"] for d in listed} == {**resolved, "audee": audee.__version__}
    t_install = time.perf_counter() - t0

    work = tmp_path / "elsewhere"
    work.mkdir()
    where = _run([str(py), "-c", "import audee, torch; print(audee.__file__); print(torch.__version__)"], work, env)
    module, torch_version = where.stdout.split()
    assert Path(module).is_relative_to(venv) and torch_version == "2.13.0+cpu"

    assert _run([str(exe), "--version"], work, env).stdout.strip() == f"audee {audee.__version__}"
    seeds = json.loads(_run([str(exe), "seeds", "--json"], work, env).stdout)
    assert len(seeds) == 7 and all(s["seed_inputs"] > 0 for s in seeds)
    assert len(_run([str(exe), "seeds"], work, env).stdout.splitlines()) == 7
    apis = _run([str(exe), "apis"], work, env).stdout.splitlines()
    assert len(apis) > 10 and apis[-1] == f"{len(apis) - 1} APIs"

    _run([str(exe), "fuzz", "--seed", "lenet5", "--backends", "torch,jax", "--variants", "2", "--batch", "8",
          "--out", "OUT", "--no-progress"], work, env, timeout=600)
    rows = [json.loads(line) for line in (work / "OUT" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and {r["id"] for r in rows} == {"lenet5-seed", "lenet5-v00000", "lenet5-v00001"}
    assert (work / "OUT" / "logs" / "audee.log").is_file()
    print(f"wheel test: install {t_install:.0f} s, total {time.perf_counter() - t0:.0f} s")
