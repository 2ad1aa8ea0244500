"""Test cases per second and CPU seconds per case, audee against NNSmith 0.1.0, side by side in one run.

In one run, one after the other on the same machine, each for the same ``--seconds``:

* **NNSmith 0.1.0**, its fuzzer (``nnsmith.cli.fuzz``, hydra) with its defaults for
  ``model.type=onnx backend.type=onnxruntime``: 5-node graphs (``mgen.max_nodes``),
  symbolic generation, each model made in PyTorch, exported to ONNX by the TorchScript
  exporter, run on onnxruntime and compared with PyTorch's outputs; then again with
  ``OMP_NUM_THREADS=1`` (its default two-thread pool spends CPU waiting on a loaded
  machine).  A test case is one ``Timing:`` line of its ``fuzz.log`` (written once per
  tested model), the window runs from the start of its loop (its "Test success info
  supressed" line) to the last case's end: after start-up (imports, the once-per-stack
  operator dtype test, cached in the private directory).
* **audee**, API-level one-layer cases (``audee.fuzz.fuzz_apis``, every configured API) on
  each ``--audee`` backend set: by default ``torch,torch-onnx-ts`` (NNSmith's own pair: eager
  torch against the TorchScript exporter on onnxruntime) and the four default backends;
  packed ``K`` cases a model for each ``--pack K`` other than 1.  Per configuration: a
  started pool, one untimed warm-up case (the frameworks' lazy imports, the first
  conversion), then rounds of one new case per API (every configured API in a fixed
  shuffled order, so any prefix is a mix; a round resumes the run directory) for
  ``--seconds``; the window runs from the first round's start to the last case's end (the
  progress callback stamps each case and stops the run once the time is up).

* **the bare floor** of audee's cases on ``torch,torch-onnx-ts`` (:func:`floor_child`): the
  same specs in one process with nothing of audee around them but the spec -> Keras
  translation (the model on torch built as audee builds it, placeholder weights instead of its initializers, an eager call, the TorchScript
  export of that call, an onnxruntime session and run, the outputs compared), timed after
  one untimed case; audee's CPU per case over the floor's is printed below the table.

CPU seconds per case count every process of the tool in its window (``proc_cpu.tree_seconds``:
NNSmith's process, sampled from ``/proc`` while it runs and read at its loop's start and its
last case; audee's parent, its live workers and any worker restarted meanwhile,
``RUSAGE_CHILDREN``), so the load of other jobs on the machine counts less than in cases
per second.  Each tool's bug groups in its window: NNSmith's bug reports (``bug-*/meta.json``
and ``err.log``) grouped by symptom, stage and the first line of the error with numbers
folded; audee's root causes (``audee.fuzz.summarize``: class, kind, component, op, API).

Prints one table (tool, backends, pack, cases, seconds, cases/s, CPU-s per case, the
ratios to NNSmith with its default threads) and the groups; writes them as JSON with
``--json PATH`` and as Markdown with ``--md PATH`` (the machine's load average beside
them).  On a shared machine compare the ratios of one run, not absolute rates across runs.

    python experiments/bench_vs_nnsmith.py [--seconds 180] [--pack 1] [--md OUT.md] [--json OUT.json]

NNSmith is no dependency of audee.  It is installed once into a private directory
(``--cache``, default ``experiments/.cache/``, git-ignored), as ``pip install --target
DIR/site --no-deps`` of ``NNSMITH_REQS`` (NNSmith and the dependencies it imports that
the venv lacks), reusing the venv's torch, onnx and onnxruntime; a marker file naming the
list skips the install when it is there.  NNSmith then runs in a subprocess of this venv's
Python with ``DIR/site`` first on ``PYTHONPATH``, started through a small bootstrap
(``BOOT``, written into the private directory) that patches at import time and runs
``nnsmith.cli.fuzz`` as ``__main__``; no installed file is modified.

What breaks on today's stack, and what this script does about it:

* ``torch.onnx.export`` uses the torch.export-based (dynamo) exporter by default since
  PyTorch 2.9; NNSmith was written for the TorchScript one: the bootstrap wraps
  ``torch.onnx.export`` to default to ``dynamo=False`` (and silences the legacy exporter's
  DeprecationWarning, printed once per model otherwise).
* ``onnx._serialize`` is gone from onnx; NNSmith's onnxruntime backend calls it to hand the
  model to the session: the bootstrap puts it back (bytes as they are, else
  ``SerializeToString()``).
* z3-solver 4.12.2 and older import ``pkg_resources``, which this venv lacks (no
  setuptools): z3-solver is pinned to 4.13.0.0, the first that finds its library through
  ``importlib.resources``.
* NNSmith keeps its operator dtype cache under ``appdirs.user_cache_dir`` (``~/.cache``):
  ``XDG_CACHE_HOME`` points into the private directory.  Hydra writes its log directory
  under the working directory (``outputs/DATE/TIME``): ``hydra.run.dir`` is a temp dir.
* Not a breakage, NNSmith's own findings: with onnxruntime 1.31 a share of its models
  fail to load (float64 GELU is exported as ``Erf`` on doubles, for which onnxruntime has
  no CPU kernel, although its dtype test passed GELU on float64), and some differ from
  PyTorch beyond its tolerance; each is still one test case (its bug groups are printed).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import numpy as np

from proc_cpu import cpu_seconds, descendants, tree_seconds  # experiments/ is on the path when run as a script

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = ROOT / "experiments" / ".cache"
#: audee's backend sets by default: NNSmith's pair, then audee's four default backends
AUDEE_SETS = "torch,torch-onnx-ts;tensorflow,torch,jax,onnxruntime"

#: NNSmith and the dependencies it imports that the venv lacks (numpy, PyYAML, packaging,
#: six, torch, onnx, onnxruntime come from the venv); pinned so the install is one thing
NNSMITH_REQS = ["nnsmith==0.1.0", "z3-solver==4.13.0.0", "hydra-core==1.3.2", "omegaconf==2.3.0",
                "antlr4-python3-runtime==4.9.3", "hydra-colorlog==1.2.0", "colorlog==6.7.0",
                "multipledispatch==0.6.0", "appdirs==1.4.4"]

#: the bootstrap NNSmith runs under: the two shims, then its hydra entry point as __main__
BOOT = '''"""Runs NNSmith 0.1.0's fuzzer on today's stack (written by experiments/bench_vs_nnsmith.py)."""
import runpy
import warnings

import onnx
import torch.onnx

if not hasattr(onnx, "_serialize"):  # removed from onnx; nnsmith.backends.onnxruntime calls it
    def _serialize(proto):
        return proto if isinstance(proto, bytes) else proto.SerializeToString()

    onnx._serialize = _serialize

_export = torch.onnx.export


def _legacy_export(*args, **kwargs):  # NNSmith was written for the TorchScript exporter
    kwargs.setdefault("dynamo", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _export(*args, **kwargs)


torch.onnx.export = _legacy_export
runpy.run_module("nnsmith.cli.fuzz", run_name="__main__", alter_sys=True)
'''


# ---- NNSmith ---------------------------------------------------------------------------------------
def install_nnsmith(cache: Path) -> Path:
    """NNSmith's private directory (``site/`` for PYTHONPATH, ``xdg/``, the bootstrap),
    installed unless its marker names exactly ``NNSMITH_REQS``."""
    home = cache / "nnsmith-0.1.0"
    site, marker = home / "site", home / "installed.txt"
    want = "\n".join(NNSMITH_REQS) + "\n"
    if not (marker.is_file() and marker.read_text() == want and site.is_dir()):
        print(f"installing NNSmith 0.1.0 into {site} ...", flush=True)
        home.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="site-", dir=home))
        got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "--no-warn-script-location", "--no-deps", "--target", str(tmp), *NNSMITH_REQS],
                             capture_output=True, text=True)
        if got.returncode != 0:  # pip's own words; its warnings are noise otherwise
            _remove(tmp)
            raise SystemExit(f"installing NNSmith failed (pip exited {got.returncode}):\n{got.stderr[-3000:]}")
        if site.exists():
            _remove(site)
        tmp.rename(site)  # a half-done install never looks installed
        marker.write_text(want)
    (home / "boot").mkdir(exist_ok=True)
    (home / "boot" / "nnsmith_boot.py").write_text(BOOT)
    return home


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[(\w+)\]\[\w+\] - (.*)$")


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def run_nnsmith(home: Path, seconds: int, rng: int, tmp: Path, threads: int | None = None) -> dict[str, Any]:
    """NNSmith's fuzzer for ``seconds`` on onnxruntime (``threads``: its ``OMP_NUM_THREADS``,
    None: its default); its rate from its own log, its CPU from ``/proc`` samples.  Its
    seed is ``rng + 1``: NNSmith reads a seed of 0 as "draw one"."""
    out = tmp / f"nnsmith-{threads or 'default'}"
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(home / "site"), os.environ.get("PYTHONPATH", "")]),
           "XDG_CACHE_HOME": str(home / "xdg"), "CUDA_VISIBLE_DEVICES": ""}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    cached = any((home / "xdg").glob("nnsmith-0.1.0/*.yaml"))
    cmd = [sys.executable, str(home / "boot" / "nnsmith_boot.py"), "model.type=onnx", "backend.type=onnxruntime",
           f"fuzz.time={seconds}s", f"fuzz.seed={rng + 1}", f"fuzz.root={out / 'root'}",
           f"hydra.run.dir={out / 'hydra'}"]
    samples: list[tuple[float, float]] = []  # (time, CPU seconds of NNSmith's processes)
    t0 = time.time()
    with open(out / "console.txt", "w") as console:
        proc = subprocess.Popen(cmd, env=env, cwd=out, stdout=console, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            cpu = tree_seconds(proc.pid)
            if cpu == cpu:
                samples.append((time.time(), cpu))
            time.sleep(0.25)
        rc = proc.returncode
    wall = time.time() - t0
    log_file = out / "hydra" / "fuzz.log"
    if rc != 0 or not log_file.is_file():
        tail = (out / "console.txt").read_text(errors="replace")[-3000:]
        raise SystemExit(f"NNSmith exited {rc}; the end of its output:\n{tail}")
    loop_start, ends, gen, evl, totals = None, [], [], [], {}
    for line in log_file.read_text(errors="replace").splitlines():
        m = LOG_LINE.match(line)
        if not m or m.group(2) != "fuzz":
            continue
        msg = m.group(3)
        if msg.startswith("Test success info supressed"):
            loop_start = _stamp(m.group(1))
        elif msg.startswith("Timing:"):
            ends.append(_stamp(m.group(1)))
            t = dict(re.findall(r"(\w+): ([\d.]+)ms", msg))
            gen.append(float(t.get("gen", "nan")))
            evl.append(float(t.get("eval", "nan")))
        elif (t := re.match(r"Total (\d+) (testcases generated|bugs found|failed to make testcases)", msg)):
            totals[t.group(2)] = int(t.group(1))
    start = loop_start if loop_start is not None else (ends[0] if ends else t0)
    window = (ends[-1] - start) if ends else 0.0
    cpu = _cpu_between(samples, start, ends[-1]) if ends else float("nan")
    label = "onnxruntime (vs torch)" + ("" if threads is None else f", OMP_NUM_THREADS={threads}")
    return {"tool": "nnsmith 0.1.0", "backends": label, "pack": "-", "cases": len(ends),
            "seconds": window, "rate": len(ends) / window if window > 0 else 0.0,
            "cpu_s": cpu, "cpu_per_case": cpu / len(ends) if ends else float("nan"),
            "startup_s": start - t0, "process_wall_s": wall, "topset_cached": cached,
            "testcases_logged": totals.get("testcases generated"), "bugs": totals.get("bugs found"),
            "failed_to_make": totals.get("failed to make testcases"),
            "groups": nnsmith_groups(out / "root"),
            "mean_ms": {"gen": float(np.nanmean(gen)) if gen else None,
                        "eval": float(np.nanmean(evl)) if evl else None},
            "command": ("" if threads is None else f"OMP_NUM_THREADS={threads} ") + " ".join(cmd[1:])}


def _cpu_between(samples: list[tuple[float, float]], start: float, end: float) -> float:
    """CPU seconds spent between two moments, read off the samples (linear between two)."""
    if not samples:
        return float("nan")
    times, cpus = [t for t, _ in samples], [c for _, c in samples]
    return float(np.interp(end, times, cpus) - np.interp(start, times, cpus))


def nnsmith_groups(root: Path) -> list[dict[str, Any]]:
    """NNSmith's bug reports grouped: symptom, stage, the error's exception line (the last of
    its traceback) with numbers folded; each group's count and one folder."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for bug in sorted(root.glob("bug-*")):
        try:
            meta = json.loads((bug / "meta.json").read_text())
        except (OSError, ValueError):
            meta = {}
        text = (bug / "err.log").read_text(errors="replace") if (bug / "err.log").is_file() else ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        raised = [k for k, ln in enumerate(lines) if re.match(r"[\w.]*(Error|Exception|NotImplemented)\b", ln)]
        if raised:  # a traceback's exception line, with the line after it when the message starts there
            k = raised[-1]
            head = lines[k] + (f" {lines[k + 1]}" if lines[k].endswith(":") and k + 1 < len(lines) else "")
        else:
            head = lines[0] if lines else ""
        head = re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?(e[-+]?\d+)?", "<n>", head)[:200]
        key = (str(meta.get("symptom", "?")), str(meta.get("stage", "?")), head)
        g = groups.setdefault(key, {"symptom": key[0], "stage": key[1], "error": key[2], "reports": 0,
                                    "first": bug.name})
        g["reports"] += 1
    return sorted(groups.values(), key=lambda g: -g["reports"])


# ---- audee -----------------------------------------------------------------------------------------
class TimeUp(Exception):
    """Raised from the progress callback to end a timed audee run (its pool is then closed)."""


def pack_supported() -> bool:
    """Whether this build's FuzzSettings has the ``pack`` setting (issue 32, part 1)."""
    from audee.settings import FuzzSettings

    fields = FuzzSettings.flat_fields() if hasattr(FuzzSettings, "flat_fields") else FuzzSettings.model_fields
    return "pack" in fields  # flat since the settings have sections; a field before


def api_order(apis: list[str], rng: int) -> list[str]:
    """The APIs in a fixed shuffled order, so that a timed run's prefix is a mix of them."""
    order = np.random.default_rng([rng, 32]).permutation(len(apis))
    return [apis[i] for i in order]


def run_audee(backends: list[str], pack: int | None, seconds: float, apis: list[str], rng: int, batch: int,
              tmp: Path) -> dict[str, Any]:
    """audee's API-level cases on ``backends`` for ``seconds`` after start-up and a warm-up
    case; ``pack``: FuzzConfig's ``pack`` (None: the field is not passed)."""
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, fuzz_apis, start_pool
    from audee.store import RunStore
    from audee.store.results import phase_summary

    refs = parse_backends(",".join(backends))
    extra: dict[str, Any] = {} if pack is None else {"pack": pack}
    name = f"{'-'.join(backends)}-pack{pack or 0}"
    run_dir = tmp / name
    stamps: list[float] = []
    t = time.perf_counter()
    with start_pool(FuzzConfig(refs, tmp / f"{name}-start", variants=0), tmp / f"{name}-logs") as pool:
        startup = time.perf_counter() - t
        warmup = ["Dense"] if "Dense" in apis else apis[:1]
        fuzz_apis(warmup, FuzzConfig(refs, tmp / f"{name}-warmup", variants=1, rng=rng + 1, batch=batch,
                                        **extra), pool=pool)
        warm = time.perf_counter() - t - startup
        cpu: list[float] = [tree_seconds()]  # this process, its live workers, any waited for
        t0 = time.perf_counter()

        def progress(_: int) -> None:
            stamps.append(time.perf_counter())
            if stamps[-1] - t0 >= seconds:
                cpu.append(tree_seconds())
                raise TimeUp

        try:
            for rounds in range(1, 10_000):  # one new case per API a round; resumes the run directory
                fuzz_apis(apis, FuzzConfig(refs, run_dir, variants=rounds, rng=rng, batch=batch, **extra),
                          progress=progress, pool=pool)
        except TimeUp:
            pass
        threads = next(iter(pool.workers.values())).threads
    if len(cpu) == 1:  # the rounds ended before the time (a short API list): the CPU at the last case
        cpu.append(tree_seconds())
    rows = list(RunStore(run_dir).rows())
    window = (stamps[-1] - t0) if stamps else 0.0
    spent = cpu[1] - cpu[0]
    return {"tool": "audee", "backends": ",".join(backends), "pack": pack or 1, "cases": len(stamps),
            "seconds": window, "rate": len(stamps) / window if window > 0 else 0.0,
            "cpu_s": spent, "cpu_per_case": spent / len(stamps) if stamps else float("nan"),
            "groups": audee_groups(run_dir),
            "startup_s": startup, "warmup_s": warm, "threads": threads, "rows": len(rows),
            "failing": sum(r.status == "fail" for r in rows),
            "mean_row_seconds": float(np.mean([r.seconds for r in rows])) if rows else None,
            "phases": phase_summary(r.phases for r in rows),
            # the cases' specs, for the bare floor of the same cases (not written out)
            "specs": [json.loads(RunStore(run_dir).variant_path(r.id).read_text()) for r in rows]}


def run_audee_campaign(backends: list[str], seconds: float, apis: list[str], rng: int, batch: int,
                       tmp: Path, rate_guess: float = 25.0) -> dict[str, Any]:
    """audee's API-level cases on ``backends`` as a user runs a batch of them: ``audee
    campaign`` (one unit per API, the shard's CPUs shared out among as many units at once as
    the units' worker processes allow: ``campaign.runner.parallel_units``), in its own process
    tree.  Every API gets the same number of cases, as many as ``seconds`` at ``rate_guess``
    cases/s would take; the window runs from the first row written (the workers started) to
    the last, its CPU read off ``/proc`` samples of the whole tree (every unit's process, every
    worker), its cases the rows written in it.  Each unit ends with its repro scripts, inside
    the window."""
    import yaml

    variants = max(2, round(seconds * rate_guess / max(1, len(apis))))
    name = "campaign-" + "-".join(backends)
    spec = {"name": name, "defaults": {"rng": rng, "batch": batch},
            "runs": [{"apis": sorted(apis), "variants": variants, "backends": [list(backends)]}]}
    (tmp / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    out = tmp / name
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "audee", "campaign", str(tmp / f"{name}.yaml"), "--out", str(out), "--no-progress"]
    samples: list[tuple[float, float]] = []
    counts: list[tuple[float, int]] = []
    t0 = time.time()
    with open(tmp / f"{name}.log", "w") as console:
        proc = subprocess.Popen(cmd, env=env, stdout=console, stderr=subprocess.STDOUT)
        seen: dict[int, float] = {}  # every process of the tree so far -> its CPU when last seen
        while proc.poll() is None:
            for pid in [proc.pid, *descendants(proc.pid)]:  # a unit's process and its workers come and go
                cpu = cpu_seconds(pid)
                if cpu == cpu:
                    seen[pid] = cpu
            n = sum(len(f.read_bytes().splitlines()) for f in out.glob("units/*/results.jsonl"))
            now = time.time()
            samples.append((now, sum(seen.values())))
            counts.append((now, n))
            time.sleep(0.25)
    if proc.returncode != 0:
        raise SystemExit(f"audee campaign exited {proc.returncode}:\n{(tmp / f'{name}.log').read_text()[-3000:]}")
    started = [t for t, n in counts if n > 0]
    start = started[0] if started else t0
    first = next((n for t, n in counts if t == start), 0)
    end, total = counts[-1]
    cases = total - first
    status = json.loads(next(out.glob("status/*.json")).read_text()) if any(out.glob("status/*.json")) else {}
    window = end - start
    cpu = _cpu_between(samples, start, end)
    return {"tool": "audee campaign", "backends": ",".join(backends),
            "pack": f"{status.get('parallel_units', '?')} units", "cases": cases, "seconds": window,
            "rate": cases / window if window > 0 else 0.0, "cpu_s": cpu,
            "cpu_per_case": cpu / cases if cases else float("nan"), "startup_s": start - t0, "groups": [],
            "variants": variants, "command": " ".join(cmd[1:])}


def audee_groups(run_dir: Path) -> list[dict[str, Any]]:
    """audee's root causes in a run directory (``audee.fuzz.summarize``): class, kind,
    component, op, API, the error's head, how many cases."""
    from audee.fuzz import summarize

    return [{"class": r.get("class"), "kind": r.get("kind"), "component": r.get("component"), "op": r.get("op"),
             "api": r.get("api"), "cases": r.get("cases"), "error": str(r.get("error") or "")[:200],
             "first": r.get("first_case")} for r in summarize(run_dir)["roots"]]


# ---- the bare floor on the fast pair ---------------------------------------------------------------
#: the backend set whose bare floor is measured: NNSmith's pair
FLOOR_SET = ["torch", "torch-onnx-ts"]
FLOOR_PHASES = ("build", "eager", "export", "runtime")  # the floor's CPU split: Keras build, eager call, export, session + run


def floor_child(specs_file: str, batch: int, threads: int, warm_all: bool = False) -> None:
    """Runs in its own process (``--floor-child``): each spec of ``specs_file`` with nothing of
    audee around it but the spec -> Keras translation (``BuiltModel``): the Keras model on
    torch (built as audee builds it, placeholder weights instead of initializers), an eager call, ``torch.onnx.export(...,
    dynamo=False)`` of that call (weights baked in), an onnxruntime session, its run, the
    outputs compared; an untimed first case (the frameworks' first calls; ``warm_all``: every
    spec once, untimed, so the lazy imports of any layer are done), then every spec timed once.  Prints the CPU seconds (this process, every thread) and wall of the loop."""
    os.environ["KERAS_BACKEND"] = "torch"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import io
    import resource
    import warnings

    import keras
    import onnxruntime as ort
    import torch

    from audee.backends.keras_backends import _torch_to_numpy  # numpy of torch tensors, bfloat16 too
    from audee.backends.keras_build import BuiltModel  # the spec -> Keras translation only
    from audee.backends.ort_process import numpy_to_ort, ort_to_numpy  # OrtValues, bfloat16 too
    from audee.apis import load_api_configs
    from audee.cases.spec import ModelSpec
    from audee.mutation.apilevel import loops_over_time

    apis = load_api_configs()

    def loops_over(spec: ModelSpec) -> bool:
        api = (spec.meta or {}).get("api")
        return api in apis and loops_over_time(apis[api])

    torch.set_num_threads(threads)
    specs = [ModelSpec.from_json(s) for s in json.loads(Path(specs_file).read_text())]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1

    phases = dict.fromkeys(FLOOR_PHASES, 0.0)  # CPU seconds of the timed loop by phase

    def timed(phase: str, start: float) -> float:
        now = cpu()
        phases[phase] += now - start
        return now

    def one(spec: ModelSpec) -> bool:
        t = cpu()
        # built as audee builds it (placeholder weights where the initializers would draw:
        # every weight is then set), the least work these cases need; a user script would run
        # the initializers too (measured on the same 97 cases: 0.0411 CPU-s a case with them,
        # 0.0450 without, within this machine's run-to-run noise)
        built = BuiltModel(spec, keras, init_weights=False)
        model = built.model
        xs = [torch.randn((batch, *i.shape)).to(getattr(torch, i.dtype)) if "float" in i.dtype
              else torch.zeros((batch, *i.shape), dtype=getattr(torch, i.dtype)) for i in spec.inputs]

        class Call(torch.nn.Module):  # the Keras model a submodule: its weights the graph's initializers
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *ts: Any) -> tuple:
                outs = self.model(list(ts), training=False)
                return tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)

        call = Call().eval()
        t = timed("build", t)
        try:
            with torch.no_grad():
                eager = [o.detach().float().numpy() for o in call(*xs)]
        finally:
            t = timed("eager", t)
        buffer = io.BytesIO()
        names = [i.name for i in spec.inputs]
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(call, tuple(xs), buffer, dynamo=False, opset_version=17, input_names=names)
        finally:
            t = timed("export", t)
        try:
            session = ort.InferenceSession(buffer.getvalue(), opts, providers=["CPUExecutionProvider"])
            feed = {i.name: numpy_to_ort(_torch_to_numpy(x)) for i, x in zip(session.get_inputs(), xs)}
            got = [ort_to_numpy(v) for v in session.run_with_ort_values(None, feed)]  # bfloat16 too
        finally:
            timed("runtime", t)
        return all(np.allclose(np.asarray(a, np.float32), b, rtol=1e-2, atol=1e-3, equal_nan=True)
                   for a, b in zip(got, eager))

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    for spec in specs if warm_all else specs[:1]:
        try:
            one(spec)
        except Exception:  # noqa: BLE001 - the warm-up only
            pass
    phases.update(dict.fromkeys(phases, 0.0))
    looping = {s.name for s in specs if loops_over(s)}  # recurrent layers: the tracer unrolls their time loop
    looping_cpu = 0.0
    ok = failed = 0
    why: dict[str, int] = {}
    c0, t0 = cpu(), time.perf_counter()
    for spec in specs:
        c1 = cpu()
        try:
            ok += bool(one(spec))
        except Exception as exc:  # noqa: BLE001 - a spec the exporter or runtime refuses costs what it cost
            failed += 1
            head = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:80] if str(exc).strip() else ''}"
            why[head] = why.get(head, 0) + 1
        if spec.name in looping:
            looping_cpu += cpu() - c1
    print(json.dumps({"cpu_s": cpu() - c0, "seconds": time.perf_counter() - t0, "cases": len(specs),
                      "agree": ok, "failed": failed, "why": why, "phases": phases,
                      "looping_cases": len(looping), "looping_cpu_s": looping_cpu}), flush=True)


def run_floor(specs: list[dict], batch: int, threads: int, warm_all: bool = False) -> dict[str, Any]:
    """The bare floor of ``specs`` on NNSmith's pair (:func:`floor_child`, one process with
    audee's per-worker thread count)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(specs, f)
    from audee.backends.worker import limit_threads

    saved = dict(os.environ)
    limit_threads(threads)  # the thread variables audee's workers set, inherited by the floor's process
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), saved.get("PYTHONPATH", "")])}
    os.environ.clear()
    os.environ.update(saved)
    try:
        got = subprocess.run([sys.executable, __file__, "--floor-child", f.name, str(batch), str(threads),
                              str(int(warm_all))], env=env,
                             capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    lines = [ln for ln in got.stdout.splitlines() if ln.startswith("{")]
    if got.returncode != 0 or not lines:
        raise SystemExit(f"the floor's process exited {got.returncode}:\n{got.stderr[-3000:]}")
    out = json.loads(lines[-1])
    n = out["cases"]
    return {"tool": "bare floor", "backends": ",".join(FLOOR_SET), "pack": "-", "cases": n,
            "seconds": out["seconds"], "rate": n / out["seconds"] if out["seconds"] > 0 else 0.0,
            "cpu_s": out["cpu_s"], "cpu_per_case": out["cpu_s"] / n if n else float("nan"),
            "startup_s": 0.0, "agree": out["agree"], "failed": out["failed"], "refusals": out["why"], "groups": [],
            "phases": out["phases"], "looping_cases": out["looping_cases"], "looping_cpu_s": out["looping_cpu_s"],
            "threads": threads}


# ---- the table -------------------------------------------------------------------------------------
COLUMNS = ["tool", "backends", "pack", "cases", "seconds", "cases/s", "CPU-s/case", "rate ratio", "CPU ratio"]


def _cells(r: dict[str, Any]) -> list[str]:
    def num(v: Any, fmt: str) -> str:
        return "-" if v is None or v != v else format(v, fmt)

    return [r["tool"], r["backends"], str(r["pack"]), str(r["cases"]), f"{r['seconds']:.1f}", f"{r['rate']:.2f}",
            num(r.get("cpu_per_case"), ".4f"), num(r.get("ratio"), ".3f"), num(r.get("cpu_ratio"), ".3f")]


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The one table, as aligned text."""
    cells = [COLUMNS] + [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    return ["  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
            for row in cells]


def floor_lines(rows: list[dict[str, Any]]) -> list[str]:
    """audee's CPU per case on the fast pair over the bare floor's on the same cases."""
    floor = next((r for r in rows if r["tool"] == "bare floor"), None)
    return [f"audee on {r['backends']}: {r['cpu_per_case']:.4f} CPU-s a case against the bare floor's "
            f"{floor['cpu_per_case']:.4f} on the same {floor['cases']} cases ({floor['agree']} agreeing, "
            f"{floor['failed']} refused): {r['floor_ratio']:.2f}x the floor"
            for r in rows if floor is not None and r.get("floor_ratio") is not None] + floor_split(floor)


def floor_split(floor: dict[str, Any] | None) -> list[str]:
    """Where the floor's own CPU goes: by phase, and the share of the layers that loop over
    time (the tracer unrolls them); what no harness around the frameworks can take away."""
    if floor is None or not floor.get("phases") or floor["cpu_s"] <= 0:
        return []
    total = floor["cpu_s"]
    split = ", ".join(f"{k} {v / total:.0%}" for k, v in floor["phases"].items())
    return [f"the bare floor's CPU by phase: {split}; the {floor['looping_cases']} cases of layers that loop over "
            f"time: {floor['looping_cpu_s'] / total:.0%} of it"]


def group_lines(r: dict[str, Any]) -> list[str]:
    """One line per bug group of a row's tool in its window."""
    if r["tool"].startswith("nnsmith"):
        return [f"{g['reports']:>4} x {g['symptom']} in {g['stage']}: {g['error']} ({g['first']})" for g in r["groups"]]
    return [f"{g['cases']:>4} x [{g['class']}] {g['kind']} {g['component'] or '-'} {g['op'] or '-'} ({g['api'] or '-'}): "
            f"{g['error'][:140]}" for g in r["groups"]]


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The result page: the command, the machine and its load, the table, each tool's groups."""
    from audee.core.markdown import cell, table

    out = ["# audee against NNSmith 0.1.0, side by side (`make bench-nnsmith`)", "",
           f"`{meta['command']}` on {meta['date']}, {meta['cpus']} CPUs ({meta['machine']}); load average "
           f"(1, 5, 15 min) {meta['load_avg_at_start']} at the start, {meta['load_avg_at_end']} at the end.",
           f"Each tool and configuration fuzzed for {meta['seconds']} s after its start-up; CPU-s per case counts every "
           "process of the tool in its window; the ratios are to NNSmith with its default threads (rate: audee's "
           "cases/s over NNSmith's; CPU: audee's CPU-s per case over NNSmith's).", "",
           table(COLUMNS, [_cells(r) for r in rows]), "", *floor_lines(rows), ""]
    for r in rows:
        if r["tool"] == "bare floor":
            continue
        groups = group_lines(r)
        out += [f"## {cell(r['tool'])} on {cell(r['backends'])}, pack {r['pack']}: {len(groups)} groups", ""]
        out += [f"- {cell(g)}" for g in groups] or ["- none"]
        out.append("")
    return "\n".join(out)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--floor-child":
        floor_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1")
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=180, help="time each tool and configuration fuzzes, after start-up")
    ap.add_argument("--audee", default=AUDEE_SETS, help="audee's backend sets, ';'-separated (each comma-separated)")
    ap.add_argument("--pack", default="1", help="K[,K...]: API-level cases per model for audee (1: unpacked; "
                                                "K > 1 used when this build has the pack setting)")
    ap.add_argument("--apis", default="all", help="audee's APIs (comma-separated, or all)")
    ap.add_argument("--rng", type=int, default=0, help="random seed of both tools")
    ap.add_argument("--batch", type=int, default=32, help="audee's batch per case")
    ap.add_argument("--no-campaign", dest="campaign", action="store_false",
                    help="leave out audee's campaign on NNSmith's pair (units at once, as the CPUs allow)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where NNSmith is installed (once)")
    ap.add_argument("--json", type=Path, help="also write the table, with details, here")
    ap.add_argument("--md", type=Path, help="also write the table and the bug groups as Markdown here")
    args = ap.parse_args()
    packs = [int(k) for k in args.pack.split(",") if k.strip()]
    if any(k < 1 for k in packs):
        ap.error("--pack takes positive integers")

    from audee.apis import load_api_configs
    from audee.backends.registry import parse_backends

    known = load_api_configs()
    apis = sorted(known) if args.apis == "all" else [a.strip() for a in args.apis.split(",") if a.strip()]
    unknown = [a for a in apis if a not in known]
    if unknown:
        ap.error(f"unknown APIs: {', '.join(unknown)}")
    apis = api_order(apis, args.rng)
    sets = [[b.strip() for b in part.split(",") if b.strip()] for part in args.audee.split(";") if part.strip()]
    for backends in sets:
        try:
            parse_backends(",".join(backends))
        except Exception as exc:  # AudeeError: an unknown backend, in its own words
            ap.error(f"--audee: {exc}")

    settings: list[int | None] = [1] + [k for k in dict.fromkeys(packs) if k != 1]
    if not pack_supported():
        print("unpacked only: this build has no pack setting", flush=True)
        settings = [None]

    home = install_nnsmith(args.cache)
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-vs-nnsmith-") as tmp:
        jobs: list[Callable[[], dict[str, Any]]] = [
            lambda: run_nnsmith(home, args.seconds, args.rng, Path(tmp)),
            lambda: run_nnsmith(home, args.seconds, args.rng, Path(tmp), threads=1)]
        for backends in sets:
            for pack in settings:
                jobs.append(lambda b=backends, p=pack: run_audee(b, p, args.seconds, apis, args.rng, args.batch,
                                                                 Path(tmp)))
            if backends == FLOOR_SET and args.campaign:  # NNSmith's pair as a batch campaign: units at once
                jobs.append(lambda b=backends: run_audee_campaign(b, args.seconds, apis, args.rng, args.batch,
                                                                  Path(tmp)))
        for job in jobs:
            got = [job()]
            if got[0]["tool"] == "audee" and got[0]["backends"] == ",".join(FLOOR_SET) and got[0]["pack"] == 1:
                # the same cases, bare: the floor audee's CPU per case is held to
                got.append(run_floor(got[0]["specs"], args.batch, got[0]["threads"]))
                got[0]["floor_ratio"] = got[0]["cpu_per_case"] / got[1]["cpu_per_case"]
            for r in got:
                print(f"{r['tool']:<14} {r['backends']:<44} pack {r['pack']!s:<3} {r['cases']:>5} cases in "
                      f"{r['seconds']:6.1f} s = {r['rate']:7.2f}/s, {r['cpu_per_case']:.4f} CPU-s a case "
                      f"(start-up {r['startup_s']:.1f} s; load {os.getloadavg()[0]:.2f})", flush=True)
            rows += got
    base, base_cpu = rows[0]["rate"], rows[0]["cpu_per_case"]
    for r in rows:
        r["ratio"] = r["rate"] / base if base > 0 else None
        r["cpu_ratio"] = r["cpu_per_case"] / base_cpu if base_cpu and base_cpu == base_cpu else None
    for r in rows:
        r.pop("specs", None)
    print()
    print("\n".join(table_lines(rows)))
    print("\n".join(floor_lines(rows)))
    for r in rows:
        print(f"\n{r['tool']} on {r['backends']}, pack {r['pack']}: {len(r['groups'])} bug groups")
        print("\n".join(group_lines(r)) or "  none")
    meta = {"command": "python experiments/bench_vs_nnsmith.py " + " ".join(sys.argv[1:]),
            "cpus": os.cpu_count(), "machine": platform.platform(), "seconds": args.seconds,
            "load_avg_at_start": tuple(round(v, 2) for v in load_start),
            "load_avg_at_end": tuple(round(v, 2) for v in os.getloadavg()),
            "date": time.strftime("%Y-%m-%d %H:%M"), "pack_supported": pack_supported(),
            "nnsmith_install": NNSMITH_REQS, "apis": len(apis)}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "columns": COLUMNS, "rows": rows}, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(markdown(rows, meta) + "\n")
        print(f"wrote {args.md}")


if __name__ == "__main__":
    main()
