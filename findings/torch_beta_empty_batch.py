"""torch.distributions.Beta/Dirichlet with an empty batch_shape (0,) fail at construction:
'cannot reshape tensor of 0 elements into shape [0, -1]' (constraint check in
torch/distributions/constraints.py _IndependentConstraint/simplex check).
Keras torch backend keras.random.beta(shape=(0,)) -> MixUp / CutMix on a batch of 0 rows."""
import argparse, os, sys
ap = argparse.ArgumentParser(); ap.add_argument("--keras", action="store_true", help="also check Keras layers (torch backend)")
args = ap.parse_args()
os.environ["KERAS_BACKEND"] = "torch"
import torch

bad = 0
def check(name, fn, want):
    global bad
    try:
        got = tuple(fn().shape)
    except Exception as e:
        got = f"{type(e).__name__}: {' '.join(str(e).split())[:75]}"
    ok = got == want; bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {name:52s} got {got} want {want}")

e = torch.ones(0)
check("Gamma(ones(0),ones(0)).sample()  [control]", lambda: torch.distributions.Gamma(e, e).sample(), (0,))
check("Beta(ones(0), ones(0)).sample()", lambda: torch.distributions.Beta(e, e).sample(), (0,))
check("Dirichlet(ones(0,2)).sample()", lambda: torch.distributions.Dirichlet(torch.ones(0, 2)).sample(), (0, 2))
check("Dirichlet(ones(0,2), validate_args=False).sample()", lambda: torch.distributions.Dirichlet(torch.ones(0, 2), validate_args=False).sample(), (0, 2))
if args.keras:
    import keras, numpy as np
    check("keras.random.beta((0,), 1., 1.)", lambda: keras.random.beta((0,), 1.0, 1.0), (0,))
    x = np.zeros((0, 8, 8, 3), "float32")
    for L in (keras.layers.MixUp(), keras.layers.CutMix()):
        check(f"keras {type(L).__name__} on (0,8,8,3)", lambda: L(x, training=True), (0, 8, 8, 3))
print("torch", torch.__version__)
if bad:
    print(f"REPRODUCED {bad} check(s) fail with an empty batch"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
