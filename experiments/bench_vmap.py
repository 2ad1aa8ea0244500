"""Does batching weight-level individuals pay?  JAX, LeNet-5, one input per individual.

Times, in one process and one run: n sequential calls of the jitted stateless forward
(what audee's weight-level search does per individual, minus IPC), against one call of
``jax.vmap`` over the stacked weight sets of all n individuals.

    KERAS_BACKEND=jax python experiments/bench_vmap.py [--n 20] [--repeats 30]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", default="lenet5")
    ap.add_argument("--n", type=int, nargs="+", default=[8, 20, 50])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import keras
    import numpy as np

    from audee.backends.keras_build import BuiltModel
    from audee.mutation.seeds import load_seed
    from audee.cases.weights import adapt_weights

    seed = load_seed(args.seed)
    built = BuiltModel(seed.spec, keras)
    weights = adapt_weights(seed.weights or {}, built.weight_shapes(), seed.weight_seed)
    model = built.model
    x = [jnp.asarray(seed.inputs[i.name][:1]) for i in seed.spec.inputs]

    def forward(tv, ntv, xs):
        return model.stateless_call(tv, ntv, xs, training=False)[0][built.logits_index]

    single = jax.jit(forward)
    batched = jax.jit(jax.vmap(forward, in_axes=(0, 0, None)))
    rng = np.random.default_rng(0)
    print(f"{'n':>4} {'sequential ms':>14} {'vmap ms':>9} {'speed-up':>9}")
    for n in args.n:
        sets = [{k: [a + rng.standard_cauchy(a.shape).astype(a.dtype) * 0.01 for a in v] for k, v in weights.items()}
                for _ in range(n)]
        flat = [built.flat_variables({k: [jnp.asarray(a) for a in v] for k, v in w.items()}) for w in sets]
        tv = [jnp.stack([f[0][i] for f in flat]) for i in range(len(flat[0][0]))]
        ntv = [jnp.stack([f[1][i] for f in flat]) for i in range(len(flat[0][1]))]
        ref = np.stack([np.asarray(single(f[0], f[1], x)) for f in flat])
        got = np.asarray(batched(tv, ntv, x))
        assert np.abs(ref - got).max() <= 1e-5 * np.abs(ref).max(), float(np.abs(ref - got).max())
        seq, vm = [], []
        for _ in range(args.repeats):
            t = time.perf_counter()
            for f in flat:
                single(f[0], f[1], x).block_until_ready()
            seq.append(time.perf_counter() - t)
            t = time.perf_counter()
            batched(tv, ntv, x).block_until_ready()
            vm.append(time.perf_counter() - t)
        s, v = statistics.median(seq), statistics.median(vm)
        print(f"{n:>4} {s * 1e3:>14.2f} {v * 1e3:>9.2f} {s / v:>9.2f}")


if __name__ == "__main__":
    main()
