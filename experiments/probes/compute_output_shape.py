"""Probe: each layer's public ``compute_output_shape`` against the shape Keras declares for it.

A user (and Keras itself, in ``Sequential`` and in nested layers) calls
``layer.compute_output_shape(input_shape)``; the functional model declares each layer's
output from ``compute_output_spec``.  A layer overriding one and not the other can disagree
(findings row 114 is a declaration wrong against the computed output, which the
declared-output oracle sees at run time).  This draws the API level's cases (every
configured API, valid draws, the api-cpu campaign's dtype mix, masks and causal calls),
builds each model on one Keras backend and compares, per layer, the two shapes.  It runs no
forward pass.

    KERAS_BACKEND=jax .venv/bin/python experiments/probes/compute_output_shape.py --variants 15 --rng 777
"""
from __future__ import annotations

import argparse
import collections
import sys
import warnings

warnings.filterwarnings("ignore")
import keras  # noqa: E402

from audee.apis.config import load_api_configs  # noqa: E402
from audee.backends.keras_build import MERGE_APIS, POSITIONAL_INPUT_APIS, BuiltModel  # noqa: E402
from audee.mutation.apilevel import generate_case  # noqa: E402

DTYPES = {"float32": 0.7, "float16": 0.1, "bfloat16": 0.1, "mixed_float16": 0.1}


def dims(shape) -> tuple:
    return tuple(None if d is None else int(d) for d in shape)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=15)
    ap.add_argument("--rng", type=int, default=777)
    args = ap.parse_args()
    apis = load_api_configs()
    checked, unbuilt = 0, 0
    differ: dict[str, list] = collections.defaultdict(list)
    for api in sorted(apis):
        for i in range(args.variants):
            case = generate_case(api, apis, args.rng, i, invalid_prob=0.0, dtypes=DTYPES, call_mask=0.3,
                                 call_causal=0.3)
            keras.backend.clear_session()
            try:
                built = BuiltModel(case.spec, keras)
            except Exception:  # a valid draw one backend refuses: the fuzzer's finding, not this probe's
                unbuilt += 1
                continue
            for name in built.order:
                layer, ls = built.layers[name], case.spec.layer(name)
                node = layer._inbound_nodes[0]
                shapes = [tuple(t.shape) for t in node.input_tensors][:len(ls.inputs)]  # not the mask
                try:
                    if ls.api in POSITIONAL_INPUT_APIS:
                        got = layer.compute_output_shape(*shapes)
                    else:
                        one = len(shapes) == 1 and ls.api not in MERGE_APIS
                        got = layer.compute_output_shape(shapes[0] if one else shapes)
                except NotImplementedError:
                    continue
                except Exception as exc:
                    differ[ls.api].append((case.spec.name, "raises", f"{type(exc).__name__}: {exc}"[:120]))
                    continue
                checked += 1
                declared = dims(node.output_tensors[0].shape)
                if dims(got) != declared:
                    differ[ls.api].append((case.spec.name, f"declared {declared}", f"compute_output_shape {dims(got)}"))
    for api, rows in sorted(differ.items()):
        print(f"{api}: {len(rows)}")
        for row in rows[:4]:
            print("   ", *row)
    print(f"{keras.backend.backend()}: {checked} layers checked, {sum(map(len, differ.values()))} differ or raise; "
          f"{unbuilt} models not built")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
