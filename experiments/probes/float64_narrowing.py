"""Probe: which layers a backend answers in float64 dtype but computes in float32.

The float64 reference (:mod:`audee.reference`) and the per-layer float64 recomputation
(``Executor._run_wide``) trust any float64 array as the near-exact result.  Keras'
``backend.result_type`` maps float64 to float32 on every backend but TensorFlow
(``keras/src/backend/common/dtypes.py``, ``BIT64_TO_BIT32_DTYPE``), and layers that upcast
through it (GroupNormalization, BatchNormalization, ...) then compute in float32 and cast
back.  Such an answer is float32 rounding in a float64 array: every finite value is exactly
a float32 number.  This draws the API level's valid float32 cases, widens each model to
float64 the way the reference does (:func:`audee.equivalence.rules.widened`), runs it on
real workers and counts, per backend and layer API, the layers whose float64 output is
wholly float32-representable where TensorFlow's is not, as the reference runs it
(an ``exact`` spec: :meth:`audee.backends.base.Backend.keeping_float64`) or, with
``--as-users-run``, as users run it (TensorFlow keeps float64 in
``result_type``, so its answer is the yardstick; a layer exact on every backend, such as
ReLU or a reshape, is representable on all of them and counted nowhere).  A row where
TensorFlow's own answer is representable and another backend's is not names TensorFlow.

    .venv/bin/python experiments/probes/float64_narrowing.py --variants 3 --rng 777 [--as-users-run]
"""
from __future__ import annotations

import argparse
import collections
import tempfile
import warnings
from pathlib import Path

import numpy as np

warnings.filterwarnings("ignore")

from audee.apis.config import load_api_configs  # noqa: E402
from audee.backends.pool import Pool  # noqa: E402
from audee.backends.registry import parse_backends  # noqa: E402
from audee.cases.spec import weights_key  # noqa: E402
from audee.cases.weights import init_weights  # noqa: E402
from audee.core.floats import float32_valued  # noqa: E402
from audee.equivalence.rules import widened  # noqa: E402
from audee.mutation.apilevel import generate_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=3)
    ap.add_argument("--rng", type=int, default=777)
    ap.add_argument("--backends", default="tensorflow,torch,jax-x64")
    ap.add_argument("--apis", default="all", help="comma-separated layer APIs (default: every configured one)")
    ap.add_argument("--as-users-run", action="store_true",
                    help="the widened model as users run it, not `exact` as the reference runs it")
    args = ap.parse_args()
    apis = load_api_configs()
    names = sorted(apis) if args.apis == "all" else args.apis.split(",")
    narrowed: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    checked = collections.Counter()
    with tempfile.TemporaryDirectory() as logs, Pool(parse_backends(args.backends), Path(logs), timeout=300) as pool:
        yard = pool.labels[0]
        for api in names:
            for i in range(args.variants):
                case = generate_case(api, apis, args.rng, i, invalid_prob=0.0, dtypes={"float32": 1.0})
                built = pool.build(case.spec)
                shapes = next((r["shapes"] for r in built.values() if isinstance(r, dict)), None)
                if shapes is None:
                    continue
                weights = init_weights(shapes, args.rng + i)
                spec, wide_w = widened(case.spec, weights, "float64")
                spec.exact = not args.as_users_run
                wide_in = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in case.inputs.items()}
                got = pool.run(spec, wide_w, weights_key(wide_w), wide_in, layers=True)
                if not isinstance(got.get(yard), dict):
                    continue
                for name, ref in got[yard]["layers"].items():
                    api_of = spec.layer(name).api
                    for label, reply in got.items():
                        if label == yard or not isinstance(reply, dict):
                            continue
                        out = reply["layers"].get(name)
                        if out is None:
                            continue
                        checked[label] += 1
                        if float32_valued(out) and not float32_valued(ref):
                            narrowed[label][api_of] += 1
                        elif float32_valued(ref) and not float32_valued(out):
                            narrowed[yard][f"{api_of} (beside {label})"] += 1
    for label in sorted(narrowed):
        rows = narrowed[label]
        print(f"{label}: {sum(rows.values())} layer outputs float32 in a float64 array")
        for api, n in sorted(rows.items()):
            print(f"    {api}: {n}")
    print(f"layers checked: {dict(checked)}")
    return 1 if narrowed else 0


if __name__ == "__main__":
    raise SystemExit(main())
