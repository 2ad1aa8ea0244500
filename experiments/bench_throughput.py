"""New models per second (issue 13), audee against the bare-framework floor, in one run.

Two spec streams: the LeNet-5 network variants of ``audee fuzz --seed lenet5`` and
API-level one-layer models (``audee fuzz --api``).  For each backend alone and for the
set of all of them, side by side:

* audee: ``audee.fuzz`` on a started pool (mutation, redraw builds, weights, the
  workers, the oracles, results rows, case files), rate after start-up: cases after the
  first one / wall from the first case's end to the last one's;
* floor: the same specs (read back from the run's ``variants/``), in one process per
  backend with no audee pool, oracles or I/O around it: build the Keras model (its
  initializers run, as in user code), set weights, the compiled call (tf.function,
  jax.jit, a torch call, tf2onnx + an onnxruntime session), one batch of the same size;
  the processes of a set start their loops together after their imports; rate after the
  first spec as for audee.  Each process gets the CPU threads audee's pool would give it.

ratio = floor rate / audee rate (audee's time per model over the floor's).  Writes
``OUT/throughput.md`` and ``OUT/throughput.json``.

    python experiments/bench_throughput.py [--variants 20] [--api-cases 4] [--out experiments/results]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
APIS = ["Dense", "Conv2D", "MaxPooling2D", "BatchNormalization", "LayerNormalization", "Conv1D",
        "AveragePooling2D", "Flatten"]


# ---- the floor: bare framework code, one process per backend ------------------------------------
def floor_child(backend: str, specs_file: str, batch: int) -> None:
    """Runs in its own process (``--floor-child``): the specs of ``specs_file``, bare."""
    from audee.cases.spec import ModelSpec

    keras_backend = "tensorflow" if backend == "onnxruntime" else backend
    os.environ["KERAS_BACKEND"] = keras_backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ["JAX_PLATFORMS"] = "cpu"
    import keras  # noqa: F401 - the import is start-up, not timed

    from audee.backends.keras_build import BuiltModel  # the spec -> Keras translation (no worker, no pool)

    if keras_backend == "tensorflow":
        import tensorflow as tf
    if backend == "onnxruntime":
        import onnxruntime as ort
        import tf2onnx
    if keras_backend == "jax":
        import jax
    if keras_backend == "torch":
        import torch
    specs = [ModelSpec.from_json(s) for s in json.loads(Path(specs_file).read_text())]
    rng = np.random.default_rng(0)
    inputs = [{i.name: (rng.random((batch, *i.shape)).astype(i.dtype) if "float" in i.dtype
                        else np.zeros((batch, *i.shape), i.dtype)) for i in spec.inputs} for spec in specs]
    print("ready", flush=True)
    sys.stdin.readline()  # go: the processes of a set start together
    ends, failed = [], 0
    t0 = time.perf_counter()
    for spec, x in zip(specs, inputs):
        try:
            built = BuiltModel(spec, keras)  # plain Keras: initializers run
            model = built.model
            for layer in built.layers.values():  # a new weight set (values do not matter here)
                if layer.weights:
                    layer.set_weights([np.full(tuple(v.shape), 0.01, str(v.dtype) if str(v.dtype) != "bfloat16"
                                               else "float32") for v in layer.weights])
            xs = [x[i.name] for i in spec.inputs]
            if backend == "tensorflow":
                fn = tf.function(lambda xs: model(xs, training=False), autograph=False)
                [np.asarray(o) for o in fn(xs)]
            elif backend == "jax":
                fn = jax.jit(lambda tv, ntv, xs: model.stateless_call(tv, ntv, xs, training=False)[0])
                outs = fn([v.value for v in model.trainable_variables],
                          [v.value for v in model.non_trainable_variables], xs)
                [np.asarray(o) for o in outs]
            elif backend == "torch":
                with torch.no_grad():
                    [o.detach().cpu().numpy() for o in model([torch.from_numpy(a) for a in xs], training=False)]
            else:
                sig = [tf.TensorSpec((None, *i.shape), i.dtype, name=i.name) for i in spec.inputs]
                fn = tf.function(lambda *xs: model(list(xs), training=False), input_signature=sig, autograph=False)
                proto, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=15)
                opts = ort.SessionOptions()
                if os.environ.get("AUDEE_THREADS"):
                    opts.intra_op_num_threads = int(os.environ["AUDEE_THREADS"])
                    opts.inter_op_num_threads = 1
                sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
                sess.run(None, {i.name: x[i.name] for i in spec.inputs})
        except Exception:  # noqa: BLE001 - a spec this framework refuses costs what it cost
            failed += 1
        ends.append(time.perf_counter() - t0)
    print(json.dumps({"ends": ends, "failed": failed}), flush=True)


def run_floor(backends: list[str], specs: list[dict], batch: int, threads: int) -> dict[str, Any]:
    """The floor for a backend set: its processes concurrently, loops started together."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(specs, f)
    from audee.backends.worker import limit_threads

    saved = dict(os.environ)
    limit_threads(threads)  # the thread variables audee sets in its workers, inherited by the floor's
    env = {**os.environ, "AUDEE_THREADS": str(threads),
           "PYTHONPATH": str(ROOT) + os.pathsep + saved.get("PYTHONPATH", "")}
    os.environ.clear()
    os.environ.update(saved)
    procs = [subprocess.Popen([sys.executable, __file__, "--floor-child", b, f.name, str(batch)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for b in backends]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    got = {b: json.loads(p.stdout.readline()) for b, p in zip(backends, procs)}
    for p in procs:
        p.wait()
    os.unlink(f.name)
    ends = {b: g["ends"] for b, g in got.items()}
    n = len(specs)
    after_first = max(e[-1] for e in ends.values()) - max(e[0] for e in ends.values())
    return {"models": n, "wall_after_first_s": after_first, "rate": (n - 1) / after_first if n > 1 else 0.0,
            "failed": {b: g["failed"] for b, g in got.items()}}


# ---- audee ----------------------------------------------------------------------------------------
def run_audee(backends: list[str], variants: int, apis: list[str], api_cases: int, batch: int,
              tmp: Path) -> dict[str, Any]:
    """Both streams on one started pool; per stream: rate after the first case, the specs
    it ran (for the floor), audee's phase summary."""
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, fuzz, fuzz_apis, start_pool, summarize
    from audee.mutation.seeds import load_seed
    from audee.store import RunStore

    refs = parse_backends(",".join(backends))
    out: dict[str, Any] = {}
    cfg0 = FuzzConfig(refs, tmp / "start", variants=0)
    t = time.perf_counter()
    with start_pool(cfg0, tmp / "logs") as pool:
        out["startup_s"] = time.perf_counter() - t
        threads = next(iter(pool.workers.values())).threads
        for stream in ("lenet5", "api"):
            run_dir = tmp / f"{stream}-{'-'.join(backends)}"
            stamps: list[float] = []
            if stream == "lenet5":
                seed = load_seed("lenet5")
                cfg = FuzzConfig(refs, run_dir, variants=variants, rng=0, batch=batch)
                fuzz(seed, seed.inputs, cfg, progress=lambda _: stamps.append(time.perf_counter()), pool=pool)
            else:
                cfg = FuzzConfig(refs, run_dir, variants=api_cases, rng=0, batch=batch)
                fuzz_apis(apis, cfg, progress=lambda _: stamps.append(time.perf_counter()), pool=pool)
            store = RunStore(run_dir)
            ids = [r.id for r in store.rows()]
            specs = [json.loads(store.variant_path(i).read_text()) for i in ids]
            wall = stamps[-1] - stamps[0]
            out[stream] = {"models": len(stamps), "wall_after_first_s": wall,
                           "rate": (len(stamps) - 1) / wall if wall > 0 else 0.0,
                           "phases": summarize(run_dir).get("phases", {}), "specs": specs}
    out["threads"] = threads
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--floor-child":
        floor_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="tensorflow,torch,jax,onnxruntime")
    ap.add_argument("--variants", type=int, default=20, help="LeNet-5 variants per backend set")
    ap.add_argument("--apis", default=",".join(APIS))
    ap.add_argument("--api-cases", type=int, default=4, help="cases per API")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--no-single", action="store_true", help="only the whole backend set, not each backend alone")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "results")
    args = ap.parse_args()
    backends = args.backends.split(",")
    apis = args.apis.split(",")
    sets = ([] if args.no_single else [[b] for b in backends]) + [backends]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bset in sets:
            got = run_audee(bset, args.variants, apis, args.api_cases, args.batch, Path(tmp))
            for stream in ("lenet5", "api"):
                floor = run_floor(bset, got[stream]["specs"], args.batch, got["threads"])
                a = got[stream]
                rows.append({"backends": ",".join(bset), "stream": stream, "models": a["models"],
                             "audee_rate": a["rate"], "floor_rate": floor["rate"],
                             "ratio": floor["rate"] / a["rate"] if a["rate"] else float("inf"),
                             "audee_wall_s": a["wall_after_first_s"], "floor_wall_s": floor["wall_after_first_s"],
                             "floor_failed": floor["failed"], "threads": got["threads"],
                             "startup_s": got["startup_s"], "phases": a["phases"]})
                r = rows[-1]
                print(f"{r['backends']:<36} {stream:<7} {r['models']:>4} models  audee {r['audee_rate']:6.2f}/s  "
                      f"floor {r['floor_rate']:6.2f}/s  ratio {r['ratio']:5.2f}", flush=True)
    write(args, rows)


def write(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"command": "python experiments/bench_throughput.py " + " ".join(sys.argv[1:]),
            "cpus": os.cpu_count(), "machine": platform.platform(), "load_avg_at_end": os.getloadavg(),
            "date": time.strftime("%Y-%m-%d %H:%M")}
    (args.out / "throughput.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [f"# Throughput: audee vs the bare-framework floor (`{meta['command']}`)", "",
             f"{meta['cpus']} CPUs, load average at the end {meta['load_avg_at_end'][0]:.1f} "
             f"(a shared machine: compare ratios measured in this run, not absolute rates across runs); "
             f"{meta['date']}.", "",
             "| backends | stream | models | audee models/s | floor models/s | ratio (audee time / floor) | threads |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['backends']} | {r['stream']} | {r['models']} | {r['audee_rate']:.2f} | "
                     f"{r['floor_rate']:.2f} | {r['ratio']:.2f} | {r['threads']} |")
    lines += ["", "audee's phase timings (mean seconds per case in its workers):", "",
              "| backends | stream | backend | build | convert | weights | compile | run |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        for b, s in r["phases"].items():
            m = s["mean_s"]
            lines.append(f"| {r['backends']} | {r['stream']} | {b} | {m['build']:.3f} | {m['convert']:.3f} | "
                         f"{m['weights']:.3f} | {m['compile']:.3f} | {m['run']:.3f} |")
    (args.out / "throughput.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'throughput.md'} and throughput.json")


if __name__ == "__main__":
    main()
