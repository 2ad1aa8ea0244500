"""``audee bisect``: the first environment of an ordered list whose release computes a case
differently from the oldest (audee.repro.bisect).

On real environments: ``.venv-prev`` (``make env-prev``: Keras 3.14.1 beside .venv's
frameworks), .venv itself (Keras 3.15.1), and two more made here as ``make env-prev`` makes
its own (a venv with no packages whose ``.pth`` puts another environment's site-packages on its
path): a copy of each release.  ``ops.median`` over an even-length axis on torch changed
between the two Keras releases (tests/test_envs.py), so in the list old, old-copy, new,
new-copy the answer is ``new``, the third.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from audee.backends.registry import BackendRef
from audee.core.errors import AudeeError
from audee.core.exitcodes import ExitCode
from audee.repro.bisect import Bisection, Step, bisect
from audee.store import CaseRecord
from tests.test_envs import TORCH, _prev_or_skip

ROOT = Path(__file__).resolve().parent.parent


def _median_case(tmp: Path, x: np.ndarray, name: str = "case.pkl") -> Path:
    """An op case file as a fuzz run in torch and torch@prev writes it (the verdict does not matter
    to bisect: it runs the case again)."""
    refs = [BackendRef("torch", TORCH, "cpu"), BackendRef("torch@prev", TORCH, "cpu", env="prev", python="/x/py")]
    rec = CaseRecord(id="op-median-v00000", spec={}, weights={}, inputs={"x": x}, backends=refs,
                     verdict={"findings": []}, op={"op": "median", "args": [{"tensor": "x"}], "kwargs": {"axis": 1},
                                                   "dtypes": {"x": "float32"}})
    return rec.to_file(tmp / name)


def _copy_of(python: str, where: Path) -> str:
    """A new environment holding no package of its own: ``python``'s site-packages (and what
    its ``.pth`` files add) on its path, as ``make env-prev`` lays .venv's under .venv-prev's."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    code = ("import sys, sysconfig; print(sysconfig.get_paths()['purelib']); "
            "print('\\n'.join(p for p in sys.path if p.endswith('-packages')))")
    got = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    paths = list(dict.fromkeys(got.split()))
    mine = subprocess.run([str(where / "bin" / "python"), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()
    Path(mine, "audee-base.pth").write_text("\n".join(paths) + "\n")
    return str(where / "bin" / "python")


def test_the_answer_is_the_first_environment_that_differs_and_a_return_is_said():
    v = {"keras": "3.14.1"}, {"keras": "3.15.1"}
    steps = [Step("a", "/a", "torch@a", v[0]), Step("b", "/b", "torch@b", v[1], differs=True, seen=["deviation"]),
             Step("c", "/c", "torch@c", v[0])]
    found = Bisection("c1", "torch", steps)
    assert found.first is steps[1] and not found.monotone and found.exit_code() == ExitCode.OK
    assert found.changed() == ["keras"]
    text = found.text()
    assert "first environment that differs from a: b (keras 3.15.1)" in text
    assert "not monotone: c computes it as a again" in text
    same = Bisection("c1", "torch", [steps[0], steps[2]])
    assert same.first is None and same.exit_code() == ExitCode.NO_CHANGE == 8
    assert same.text().endswith("no environment computes the case differently from a")


def test_bad_lists_are_one_line(tmp_path):
    case = _median_case(tmp_path, np.ones((2, 4), np.float32))
    with pytest.raises(AudeeError) as e:
        bisect(case, {"a": sys.executable}, log_dir=tmp_path)
    assert str(e.value) == "--env: bisect needs at least two environments, oldest first; got 1"
    with pytest.raises(AudeeError) as e:
        bisect(case, {"a": sys.executable, "b": sys.executable}, backend="torch@prev", log_dir=tmp_path)
    assert str(e.value).startswith("--backend: 'torch@prev' names an environment")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cfg = tmp_path / "s.yaml"
    cfg.write_text("envs: [a, b]\n")
    got = subprocess.run([sys.executable, "-m", "audee", "bisect", str(case), "--envs-from", str(cfg)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 2 and got.stderr.strip().splitlines()[-1].endswith(
        f"{cfg}: envs: expected a mapping of environment names to interpreters, oldest first"), got.stderr


@pytest.mark.slow  # four torch workers, one per environment, on real releases: about a minute on 2 cores
def test_bisect_names_the_first_release_that_changed_median(tmp_path):
    prev = _prev_or_skip()
    old_copy = _copy_of(prev, tmp_path / "old-copy")
    new_copy = _copy_of(sys.executable, tmp_path / "new-copy")
    even = np.array([[1, 2, 3, 4], [4, 3, 9, 1]], np.float32)  # 3.14 on torch: the lower middle; 3.15: the mean
    case = _median_case(tmp_path, even)
    cfg = tmp_path / "campaign.yaml"  # a campaign's envs:, in its order
    cfg.write_text(json.dumps({"envs": {"old": prev, "old-copy": old_copy, "new": sys.executable,
                                        "new-copy": new_copy}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = subprocess.run([sys.executable, "-m", "audee", "bisect", str(case), "--envs-from", str(cfg), "--json"],
                         capture_output=True, text=True, env=env, timeout=900)
    assert got.returncode == ExitCode.OK, got.stdout + got.stderr[-3000:]
    doc = json.loads(got.stdout)
    assert (doc["first"], doc["monotone"], doc["backend"], doc["search"]) == ("new", True, "torch", "linear")
    steps = {s["env"]: s for s in doc["steps"]}
    assert [s["env"] for s in doc["steps"]] == ["old", "old-copy", "new", "new-copy"]
    assert [steps[e]["differs"] for e in steps] == [False, False, True, True]
    assert steps["new"]["seen"] == ["deviation"] and steps["new"]["label"] == "torch@new"
    assert steps["old-copy"]["versions"]["keras"] == steps["old"]["versions"]["keras"] == "3.14.1"
    assert steps["new-copy"]["versions"]["keras"] == steps["new"]["versions"]["keras"] == "3.15.1"
    # an odd-length axis: every release computes the same median (exit 8), --env in its order
    odd = _median_case(tmp_path, even[:, :3], "odd.pkl")
    same = subprocess.run([sys.executable, "-m", "audee", "bisect", str(odd), "--env", f"old={prev}", "--env",
                           f"new={sys.executable}"], capture_output=True, text=True, env=env, timeout=900)
    assert same.returncode == ExitCode.NO_CHANGE, same.stdout + same.stderr[-3000:]
    assert same.stdout.strip().endswith("no environment computes the case differently from old")
    assert "keras 3.14.1" in same.stdout and "keras 3.15.1" in same.stdout
