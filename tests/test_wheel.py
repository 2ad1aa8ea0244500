"""The wheel is the product: build it, install it with its dependencies into a fresh virtual
environment (pinned by requirements.txt, so torch is the local CPU build), and run audee
from outside the source tree, so only what the wheel ships can be found.

Measured on 2 shared cores with pip's local cache: 1.5 to 3.7 minutes (installing the
environment is most of it), so it carries the ``wheel`` marker: ``make test`` leaves it
out, ``make test-wheel`` (run by .ci/run after ``make test``) runs it.
"""
from __future__ import annotations

import json
import os
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
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py, exe = venv / "bin" / "python", venv / "bin" / "audee"
    # with its dependencies and extras, held to the pins: an unpinned torch would pull a CUDA build;
    # not byte-compiled (a throwaway venv: 108 s against 137 s for the whole test on 2 cores)
    _run([str(py), "-m", "pip", "install", "-q", "--no-compile", "-c", str(ROOT / "requirements.txt"),
          f"{wheels[0]}[torch,jax]"],
         tmp_path, env)
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
