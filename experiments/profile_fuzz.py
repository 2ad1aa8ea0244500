"""Where a fuzz run's CPU goes, per phase and per process: cProfile on CPU time in the parent
and in every worker of a short ``audee fuzz --api`` run.

The parent runs :func:`audee.fuzz.fuzz_apis` under ``cProfile.Profile(time.process_time)``
(waiting for a worker costs no CPU, so what it shows is the parent's own work).  Each worker
is profiled by a ``sitecustomize`` module this script writes into a temp directory put first
on the workers' ``PYTHONPATH``: it starts a CPU-time profiler when the process is an audee
worker and dumps it at exit (a worker asked to exit by the pool; a killed one is lost).
Nothing of audee is changed for it.  The phases are buckets of functions whose cumulative
CPU is read from the profiles (:data:`PARENT_PHASES`, :data:`WORKER_PHASES`); a bucket
nested in another is printed under it, the rest of the process is "other".

    python experiments/profile_fuzz.py [--backends torch,torch-onnx-ts] [--apis all] [--variants 1]
                                       [--rng 0] [--warmup Dense] [--top 25]
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SITECUSTOMIZE = '''
import atexit, cProfile, os, time
try:
    _cmd = open("/proc/self/cmdline", "rb").read().split(b"\\0")
except OSError:
    _cmd = []
if b"audee.backends.worker" in _cmd and os.environ.get("AUDEE_PROFILE_OUT"):
    import signal
    _prof = cProfile.Profile(time.process_time)
    _prof.enable()

    def _restart(*_):  # SIGUSR1 from the driver: start-up and warm-up are over
        global _prof
        _prof.disable()
        _prof = cProfile.Profile(time.process_time)
        _prof.enable()

    signal.signal(signal.SIGUSR1, _restart)

    def _dump():
        _prof.disable()
        backend = _cmd[_cmd.index(b"--backend") + 1].decode().replace(":", "_").replace("/", "_")
        _prof.dump_stats(os.path.join(os.environ["AUDEE_PROFILE_OUT"], f"{backend}-{os.getpid()}.prof"))

    atexit.register(_dump)
'''

TIMERS = '''
import atexit, json, os, time
try:
    _cmd = open("/proc/self/cmdline", "rb").read().split(b"\\0")
except OSError:
    _cmd = []
if b"audee.backends.worker" in _cmd and os.environ.get("AUDEE_PROFILE_OUT"):
    import signal

    _acc = {}

    def _timed(owner, name, label):
        fn = getattr(owner, name, None)
        if fn is None or getattr(fn, "_timed", False):
            return
        def wrapper(*a, **k):
            t = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                c = _acc.setdefault(label, [0.0, 0])
                spent = time.process_time() - t
                c[0] += spent
                c[1] += 1
                if name == "handle" and os.environ.get("AUDEE_PROFILE_TRACE"):  # each request, in order
                    msg = a[1]
                    spec = msg.get("spec") or {}
                    apis = "+".join(sorted({str(ls.get("api")) for ls in spec.get("layers", [])})) if spec else ""
                    inputs = msg.get("inputs") or {}
                    batch = [tuple(getattr(v, "shape", ())) for v in inputs.values()][:1]
                    _acc.setdefault("trace", []).append([msg.get("op"), str(msg.get("key"))[:8], apis, str(batch),
                                                         round(spent, 4), bool(msg.get("layers"))])
                if name == "export" and len(a) > 1:  # which models' exports cost what
                    apis = "+".join(sorted({ls.api for ls in a[1].built.spec.layers}))
                    e = _acc.setdefault(f"export of {apis}", [0.0, 0])
                    e[0] += spent
                    e[1] += 1
        wrapper._timed = True
        setattr(owner, name, wrapper)

    import audee.backends.registry as _reg
    _load = _reg.load_class

    def _load_class(target):  # the worker's serve() loads its backend class: patch then
        import sys
        cls = _load(target)
        main = sys.modules["__main__"]  # the worker runs as __main__ (python -m)
        for name in ("handle", "entry", "run", "compile_for", "work_ahead"):
            _timed(main.WorkerState, name, f"WorkerState.{name}")
        _timed(main, "_nonfinite", "worker._nonfinite")
        for name in ("build", "export", "prepare", "compile_for", "set_weights", "run", "session", "_new_session",
                     "_first_session", "weight_shapes", "graph_for", "_use"):
            for klass in cls.__mro__:
                if name in vars(klass):
                    _timed(klass, name, f"{cls.__name__}.{name}")
                    break
        from audee.backends import keras_build, onnx_backend, wire
        _timed(keras_build.BuiltModel, "__init__", "BuiltModel.__init__")
        for name in ("baked_proto", "onnx_checker_error", "check_output_dtypes"):
            _timed(onnx_backend, name, f"onnx_backend.{name}")
        return cls

    _reg.load_class = _load_class

    import gc
    _gc_t = [0.0]

    def _gc(phase, info):  # the garbage collector's CPU, by generation
        if phase == "start":
            _gc_t[0] = time.process_time()
        else:
            c = _acc.setdefault(f"gc generation {info['generation']}", [0.0, 0])
            c[0] += time.process_time() - _gc_t[0]
            c[1] += 1

    gc.callbacks.append(_gc)

    def _restart(*_):
        _acc.clear()

    signal.signal(signal.SIGUSR1, _restart)

    def _dump():
        backend = _cmd[_cmd.index(b"--backend") + 1].decode().rsplit(":", 1)[-1]
        with open(os.path.join(os.environ["AUDEE_PROFILE_OUT"], f"{backend}-{os.getpid()}.timers.json"), "w") as f:
            json.dump(_acc, f)

    atexit.register(_dump)
'''

#: (label, file suffix, function name): a bucket's CPU is the function's cumulative CPU
PARENT_PHASES = [
    ("make cases (mutation.apilevel.generate_case)", "mutation/apilevel.py", "generate_case"),
    ("submit (Executor.submit: build requests, weights, sends)", "engine/execute.py", "submit"),
    ("finish (Executor.finish: replies, oracles, diagnosis)", "engine/execute.py", "finish"),
    ("  judge (Executor.judge: oracles)", "engine/execute.py", "judge"),
    ("  pool messages received (wire.recv)", "backends/wire.py", "recv"),
    ("pool messages sent (wire.send)", "backends/wire.py", "send"),
    ("row (fuzz.result_row: signatures, exercised)", "audee/fuzz.py", "result_row"),
    ("  signatures (triage.signature.case_signatures)", "triage/signature.py", "case_signatures"),
    ("  exercised (oracle.exercised.exercised)", "oracle/exercised.py", "exercised"),
    ("store.append (results.jsonl)", "store/runstore.py", "append"),
    ("case file (RunStore.save_case)", "store/runstore.py", "save_case"),
    ("variant spec (RunStore.write_variant)", "store/runstore.py", "write_variant"),
    ("repro scripts (repro.write_bug_repros)", "audee/repro/__init__.py", "write_bug_repros"),
    ("resume (RunStore.done_ids)", "store/runstore.py", "done_ids"),
]
WORKER_PHASES = [
    ("handle (every request)", "backends/worker.py", "handle"),
    ("work_ahead (export/compile ahead of the run)", "backends/worker.py", "work_ahead"),
    ("build (Keras model from the spec)", "backends/keras_build.py", "__init__"),
    ("TorchScript export (TorchOnnxTsBackend.export)", "backends/torch_onnx_backend.py", "export"),
    ("  torch.onnx.export", "torch/onnx/__init__.py", "export"),
    ("  onnx.load_from_string", "onnx/__init__.py", "load_model_from_string"),
    ("ORT session (InferenceSession.__init__)", "onnxruntime_inference_collection.py", "__init__"),
    ("ORT run (run_with_ort_values)", "onnxruntime_inference_collection.py", "run_with_ort_values"),
    ("onnx.checker (onnx_checker_error)", "backends/onnx_backend.py", "onnx_checker_error"),
    ("non-finite scan (worker._nonfinite)", "backends/worker.py", "_nonfinite"),
    ("wire.recv", "backends/wire.py", "recv"),
    ("wire.send", "backends/wire.py", "send"),
]


def process_label(pool: Any, label: str) -> str:
    """A worker process's name: its backend, and the backend it hosts (``pool.hosted``)."""
    guests = [g for g, h in pool.hosted.items() if h == label]
    return "+".join([label, *guests])


def bucket_cpu(stats: pstats.Stats, suffix: str, name: str) -> tuple[float, int]:
    """Cumulative CPU seconds and calls of the functions named ``name`` in files ending ``suffix``
    (recursive calls counted once: cProfile's cumulative time does)."""
    total, calls = 0.0, 0
    for (file, _, func), (cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        if func == name and file.replace("\\", "/").endswith(suffix):
            total += ct
            calls += cc
    return total, calls


def total_cpu(stats: pstats.Stats) -> float:
    return float(stats.total_tt)  # type: ignore[attr-defined]


def report(title: str, stats: pstats.Stats, phases: list[tuple[str, str, str]], cases: int, top: int) -> list[str]:
    tot = total_cpu(stats)
    lines = [f"## {title}: {tot:.2f} CPU-s profiled, {tot / max(cases, 1):.4f} a case", "",
             "| phase | CPU-s | per case | share | calls |", "|---|---:|---:|---:|---:|"]
    for label, suffix, name in phases:
        cpu, calls = bucket_cpu(stats, suffix, name)
        lines.append(f"| {label} | {cpu:.2f} | {cpu / max(cases, 1):.4f} | {cpu / tot if tot else 0:.1%} | {calls} |")
    lines.append("")
    if top:
        import io

        buf = io.StringIO()
        stats.stream = buf  # pstats.Stats takes files and profilers, not another Stats object
        stats.sort_stats("cumulative").print_stats(top)
        lines += ["```", *[ln for ln in buf.getvalue().splitlines() if ln.strip()][-top - 2:], "```", ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="torch,torch-onnx-ts")
    ap.add_argument("--apis", default="all")
    ap.add_argument("--variants", type=int, default=1)
    ap.add_argument("--rng", type=int, default=0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", default="Dense", help="APIs of the untimed warm-up cases, one each, or 'all' (the frameworks' lazy imports, "
                         "e.g. Keras importing TensorFlow to serialize a Bidirectional layer, done before the timing; "
                         "'' for none)")
    ap.add_argument("--top", type=int, default=0, help="also print each profile's top N functions")
    ap.add_argument("--plain", action="store_true", help="no profilers: each process's true CPU a case only "
                                                          "(cProfile inflates pure-Python code several times)")
    ap.add_argument("--timers", action="store_true", help="no cProfile: CPU-time wrappers on the workers' main "
                                                           "methods (inclusive, nested), low overhead")
    ap.add_argument("--floor", action="store_true", help="also the bare floor of the same cases on torch and "
                                                          "torch-onnx-ts (bench_vs_nnsmith.run_floor) and the ratio")
    ap.add_argument("--keep", type=Path, help="keep the run directory and the .prof files here")
    args = ap.parse_args()

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="profile-fuzz-"))
    tmp.mkdir(parents=True, exist_ok=True)
    site, profs = tmp / "site", tmp / "prof"
    site.mkdir(exist_ok=True)
    profs.mkdir(exist_ok=True)
    if args.timers:
        (site / "sitecustomize.py").write_text(TIMERS)
        os.environ["AUDEE_PROFILE_OUT"] = str(profs)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    elif not args.plain:
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        os.environ["AUDEE_PROFILE_OUT"] = str(profs)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    args.plain = args.plain or args.timers  # the parent unprofiled
    sys.path.insert(0, str(ROOT / "experiments"))
    # a worker with its children (the torch exporters' onnxruntime process)
    from proc_cpu import tree_seconds as cpu_seconds

    from audee.apis import load_api_configs
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, fuzz_apis, start_pool

    apis = sorted(load_api_configs()) if args.apis == "all" else args.apis.split(",")
    refs = parse_backends(args.backends)
    run_dir = tmp / "run"
    cases = 0

    def progress(_: int) -> None:
        nonlocal cases
        cases += 1

    with start_pool(FuzzConfig(refs, tmp / "start", variants=0), tmp / "logs") as pool:
        if args.warmup:
            warm = apis if args.warmup == "all" else args.warmup.split(",")
            fuzz_apis(warm, FuzzConfig(refs, tmp / "warmup", variants=1, rng=args.rng + 1,
                                                batch=args.batch), pool=pool)
        if not args.plain or args.timers:
            for w in pool.processes.values():  # the workers' profiles start now: drop start-up and warm-up
                os.kill(w.proc.pid, signal.SIGUSR1)
            time.sleep(0.5)
        pids = {process_label(pool, label): w.proc.pid for label, w in pool.processes.items()}
        before = {label: cpu_seconds(pid) for label, pid in pids.items()}
        import audee.fuzz as fuzz_module

        repro_cpu: dict[str, float] = {}
        plain_repros = fuzz_module.FuzzLoop.repros

        def repros(self: Any) -> None:  # the repro scripts' CPU in every process
            c0 = {label: cpu_seconds(pid) for label, pid in pids.items()}
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            plain_repros(self)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            for label, pid in pids.items():
                repro_cpu[label] = repro_cpu.get(label, 0.0) + cpu_seconds(pid) - c0[label]
            repro_cpu["parent"] = repro_cpu.get("parent", 0.0) + (r1.ru_utime - r0.ru_utime) + (r1.ru_stime -
                                                                                               r0.ru_stime)

        fuzz_module.FuzzLoop.repros = repros
        prof = cProfile.Profile(time.process_time)
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.perf_counter()
        if not args.plain:
            prof.enable()
        fuzz_apis(apis, FuzzConfig(refs, run_dir, variants=args.variants, rng=args.rng, batch=args.batch),
                  progress=progress, pool=pool)
        prof.disable()
        wall = time.perf_counter() - wall0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        after = {label: cpu_seconds(pid) for label, pid in pids.items()}
    parent_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    n = max(cases, 1)
    per = {label: (after[label] - before[label]) / n for label in pids}  # NaN: restarted meanwhile
    out = [f"# {'CPU' if args.plain else 'profile'} of `audee fuzz --api {args.apis} --variants {args.variants} "
           f"--backends {args.backends}` (rng {args.rng}, batch {args.batch})", "",
           f"{cases} cases in {wall:.1f} s wall ({cases / wall:.2f}/s); CPU-s a case: parent {parent_cpu / n:.4f}"
           + "".join(f", {label} {v:.4f}" for label, v in per.items())
           + f"; total {parent_cpu / n + sum(v for v in per.values() if v == v):.4f}; "
           f"load average {tuple(round(x, 2) for x in os.getloadavg())}", "",
           f"of which the repro scripts at the run's end: CPU-s a case "
           + ", ".join(f"{label} {v / n:.4f}" for label, v in repro_cpu.items())
           + f"; total {sum(repro_cpu.values()) / n:.4f} "
           f"({len(list((run_dir / 'repro').glob('*.py'))) if (run_dir / 'repro').is_dir() else 0} scripts)", ""]
    if args.floor:
        import json

        from bench_vs_nnsmith import floor_split, run_floor

        from audee.store import RunStore

        store = RunStore(run_dir)
        threads = int(os.environ.get("AUDEE_THREADS") or 0) or next(iter(pool.workers.values())).threads
        floor = run_floor([json.loads(store.variant_path(r.id).read_text()) for r in store.rows()], args.batch,
                          threads, warm_all=args.warmup == "all")
        total = parent_cpu / n + sum(v for v in per.values() if v == v)
        out += [f"bare floor of the same {floor['cases']} cases: {floor['cpu_per_case']:.4f} CPU-s a case "
                f"({floor['agree']} agree, {floor['failed']} refused; {threads} threads); audee / floor "
                f"{total / floor['cpu_per_case']:.2f}", *floor_split(floor), ""]
    if args.plain or args.timers:
        print("\n".join(out))
        if args.timers:
            import json

            time.sleep(1.0)
            for f in sorted(profs.glob("*.timers.json")):
                acc = json.loads(f.read_text())
                print(f"\n## {f.stem}: inclusive CPU-s a case (calls)")
                trace = acc.pop("trace", None)
                if trace:
                    (profs / f"{f.stem}.trace.txt").write_text("\n".join(" ".join(map(str, t)) for t in trace))
                for label, (cpu, calls) in sorted(acc.items(), key=lambda kv: -kv[1][0])[:40]:
                    print(f"  {label:<40} {cpu / n:.4f}  ({calls})")
        return
    prof.dump_stats(str(profs / "parent.prof"))
    out += report("parent", pstats.Stats(str(profs / "parent.prof")), PARENT_PHASES, cases, args.top)
    for f in sorted(profs.glob("*.prof")):
        if f.name == "parent.prof":
            continue
        out += report(f"worker {f.stem} (from the first case; its exit included)",
                      pstats.Stats(str(f)), WORKER_PHASES, cases, args.top)
    print("\n".join(out))
    if not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
