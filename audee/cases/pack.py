"""Many test cases as one model: K independent specs side by side in one spec.

Building a model costs far more than running it (one XLA compile, one tf2onnx export,
whatever the model's size), and an API-level case is a one-layer model, so nearly all of
its cost is fixed per build.  A *pack* puts K cases into one :class:`ModelSpec`: K
disjoint subgraphs, each with its own inputs, every layer and input name prefixed per
case (``k0_``, ``k1_``, ...) so none collide.  A backend builds, converts and compiles it
once; its run already returns every layer's output (``spec.topological_order()``), so
each case's own layers are picked out of the reply and renamed back (:meth:`Pack.unpack`).

Nothing new is needed from a spec: ``validate`` does not ask every layer to reach the
output, the Keras model returns every layer (``backends/keras_build.py``) and the ONNX
export every layer too.  The pack's ``output``/``logits`` are its first case's; a run
asks for the other cases' output and logits layers by name (``layers=Pack.wanted``).

A pack of one case is the case itself (no prefix, the same spec key): a case cut out of
a pack by bisection runs exactly as it would alone.  Plain data, no framework.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from audee.cases.case import TestCase
from audee.cases.spec import InputSpec, LayerSpec, ModelSpec, Weights


def prefix(index: int) -> str:
    """The name prefix of a pack's case ``index`` (names start with a letter or ``_``, so
    ``k1_`` + name never equals ``k12_`` + another name)."""
    return f"k{index}_"


_PREFIXED = re.compile(r"(?<![A-Za-z0-9_])k(\d+)_[A-Za-z_]")


def members_named(text: str, size: int) -> list[int]:
    """The members of a pack of ``size`` whose (prefixed) layer or input names ``text``
    mentions: a converter's or runtime's error naming the node it refused points at the
    case that failed (onnxruntime: ``In Node, ("k2_t_conv2d_1/PartitionedCall", ...``)."""
    return sorted({int(m) for m in _PREFIXED.findall(text or "") if int(m) < size})


@dataclass
class PackedSpec:
    """The spec of a pack and, per member, its name prefix and layer names (unprefixed)."""

    spec: ModelSpec
    prefixes: list[str]
    layers: list[list[str]]                       # each member's layer names, its own order
    owner: dict[str, tuple[int, str]] = field(default_factory=dict)  # packed layer -> (member, own name)

    @property
    def size(self) -> int:
        return len(self.prefixes)

    def member_shapes(self, shapes: dict[str, Any]) -> list[dict[str, Any]]:
        """A build's weight shapes (packed layer names) as each member's own, in the
        order its own build lists them (the pack's topological order restricted to one
        member is the member's own: its layers become ready in the same waves)."""
        out: list[dict[str, Any]] = [{} for _ in self.prefixes]
        for name, value in shapes.items():
            owner = self.owner.get(name)
            if owner is not None:
                out[owner[0]][owner[1]] = value
        return out


def pack_specs(specs: Sequence[ModelSpec]) -> PackedSpec:
    """``specs`` side by side as one spec; one spec is returned as it is."""
    if not specs:
        raise ValueError("pack_specs: no specs")
    if len(specs) == 1:
        s = specs[0]
        return PackedSpec(s, [""], [s.layer_names()], {n: (0, n) for n in s.layer_names()})
    inputs: list[InputSpec] = []
    layers: list[LayerSpec] = []
    prefixes, names = [], []
    owner: dict[str, tuple[int, str]] = {}
    for j, s in enumerate(specs):
        pre = prefix(j)
        prefixes.append(pre)
        names.append(s.layer_names())
        inputs += [InputSpec(pre + i.name, i.shape, i.dtype, i.range) for i in s.inputs]
        for ls in s.layers:
            # parameters as they are: a nested layer's name comes from its outer layer's
            # (keras_build.default_layer), so nothing inside needs renaming
            layers.append(LayerSpec(pre + ls.name, ls.api, dict(ls.params), [pre + r for r in ls.inputs],
                                    list(ls.fixed), ls.call_renamed(lambda r, pre=pre: pre + r)))
            owner[pre + ls.name] = (j, ls.name)
    first = specs[0]
    spec = ModelSpec(f"pack{len(specs)}-{first.name}", inputs, layers, prefixes[0] + first.output,
                     prefixes[0] + first.logits_layer, {"pack": [s.name for s in specs]})
    return PackedSpec(spec, prefixes, names, owner)


@dataclass
class Pack:
    """K test cases as one (:func:`pack`): ``case`` is what the workers build and run."""

    case: TestCase
    members: list[TestCase]
    packed: PackedSpec

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def wanted(self) -> list[str]:
        """The layers a run must return besides the pack's own output: every member's
        output and logits layer (packed names)."""
        out: list[str] = []
        for pre, m in zip(self.packed.prefixes, self.members):
            for name in (m.spec.output, m.spec.logits_layer):
                if pre + name not in out:
                    out.append(pre + name)
        return out

    def unpack(self, reply: dict[str, Any]) -> list[dict[str, Any]]:
        """A backend's run reply (``layers=wanted``) as one reply per member, as the
        member's own run would give it: ``logits``, ``output``, ``nonfinite`` (its own layer
        names, topological order), ``nonfinite_rows``, ``declared`` (by its own layer names;
        absent where the backend declares nothing), and ``run_s``, its share of the run."""
        if self.size == 1:
            return [reply]
        got = reply.get("layers") or {}
        share = float(reply.get("run_s", 0.0)) / self.size
        rows = reply.get("nonfinite_rows", {})
        out = []
        for j, (pre, m) in enumerate(zip(self.packed.prefixes, self.members)):
            own = [self.packed.owner[n][1] for n in reply.get("nonfinite", [])
                   if self.packed.owner.get(n, (-1, ""))[0] == j]
            one = {"logits": got[pre + m.spec.logits_layer], "output": got[pre + m.spec.output],
                   "nonfinite": own, "nonfinite_rows": {n: rows.get(pre + n, []) for n in own}, "run_s": share}
            if "declared" in reply:
                one["declared"] = {self.packed.owner[n][1]: v for n, v in reply["declared"].items()
                                   if self.packed.owner.get(n, (-1, ""))[0] == j}
            out.append(one)
        return out


def batch_of(case: TestCase) -> int | None:
    """A case's batch size (None for a case without inputs)."""
    return case.batch if case.inputs else None


def pack(cases: Sequence[TestCase]) -> Pack:
    """``cases`` as one test case: specs side by side (:func:`pack_specs`), weights and
    inputs renamed the same way.  Only cases of one batch size go together (a model's
    inputs share their batch axis); a dtype policy stays on each layer, as it was."""
    if not cases:
        raise ValueError("pack: no cases")
    batches = {batch_of(c) for c in cases}
    if len(batches) != 1 or None in batches:
        raise ValueError(f"pack: cases of batch sizes {sorted(map(str, batches))} do not go into one model")
    packed = pack_specs([c.spec for c in cases])
    if len(cases) == 1:
        return Pack(cases[0], list(cases), packed)
    weights: Weights = {}
    inputs: dict[str, np.ndarray] = {}
    for pre, c in zip(packed.prefixes, cases):
        weights.update({pre + k: v for k, v in c.weights.items()})
        inputs.update({pre + k: v for k, v in c.inputs.items()})
    case = TestCase(packed.spec.name, packed.spec, weights, inputs, {"pack": [c.id for c in cases]})
    return Pack(case, list(cases), packed)


__all__ = ["Pack", "PackedSpec", "batch_of", "members_named", "pack", "pack_specs", "prefix"]
