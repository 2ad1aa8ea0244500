"""The shared vocabulary of a run: test case, backend outcome, finding, verdict.

A *test case* is (DNN spec, weights, inputs) — the paper's (f, x) with a batch of inputs.
Running it yields one *outcome* per backend; oracles turn outcomes into *findings*; the
findings make the case's *verdict*.  The finding kinds and their facts are
:mod:`audee.cases.kinds`' table (:class:`Kind` is re-exported here, where every oracle takes it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audee.cases.kinds import FAILURES, Kind, parse_detail
from audee.records.findings import AnyDetail, Detail
from audee.cases.spec import ModelSpec, Weights


#: Special input values a test case's rows may carry (made by audee.mutation.special and
#: recorded in ``meta['special_inputs']``; the root-cause classes read them).  Non-finite
#: values and ids out of range are outside every backend's documented contract.
#: ``lone_*``: exactly one such element in a row (or in some slices along the reduced axis)
#: among finite values; ``nan_tie``: equal maxima and a NaN in one slice (argmax, sort)
NONFINITE_SPECIALS = ("nan", "inf", "-inf", "lone_nan", "lone_inf", "lone_-inf", "nan_tie")
#: ``domain_edge``: values at the edges of the tensor's domain (its op config's ``domain``)
#: and of its dtype; recorded as ``subnormal`` when it placed a subnormal value
SPECIAL_FLOAT_KINDS = NONFINITE_SPECIALS + ("near_max", "offset", "tiny", "subnormal", "signed_zero", "ties",
                                            "domain_edge")
SPECIAL_INT_KINDS = ("out_of_range", "negative")  # integer ids outside [0, n)
#: special kinds that put a large common offset with a small spread on a row (``offset``) or on the
#: batch (``batch_offset``, ``row`` None): a valid input on which a mean or a variance cancels
OFFSET_SPECIALS = ("offset", "batch_offset")
#: special float kinds whose values are or make subnormals: TensorFlow's and JAX's CPU kernels
#: flush them to zero by design, torch keeps them (a difference on them is undefined)
SUBNORMAL_SPECIALS = ("subnormal", "tiny")
#: special float kinds whose values overflow every integer type (non-finite, or |x| near float32's
#: max): cast to an integer index (a layer config's ``value_indices``) the index is undefined
INT_OVERFLOW_SPECIALS = NONFINITE_SPECIALS + ("near_max",)
#: an op case's ``undefined`` entry (its row): an integer divisor holding a 0 (C leaves it
#: undefined; NumPy returns 0 with a warning, TensorFlow and PyTorch raise)
ZERO_DIVISOR = "integer division by zero"
#: an op case's ``undefined`` entry: a reduction without an identity (max, argmin, ptp...) over
#: an empty axis, which NumPy refuses (audee.oracle.ops.NO_IDENTITY): its failures are undefined
EMPTY_REDUCTION = "a reduction without an identity over an empty axis"
#: the start of an op case's ``undefined`` entry when Keras's own symbolic call (its shape and
#: dtype inference, ``compute_output_spec``) refuses the arguments: Keras's written contract
#: excludes them, so the case's failures are undefined (a backend silently answering is said)
SPEC_REFUSES = "outside Keras's symbolic spec"
#: what a backend's failure says when audee's memory cap stopped the case (backends/worker.py:
#: a worker holding too much, an op's outputs too big to pass back): it asked for more memory
#: than a worker may hold, outside any contract (rootcause: undefined)
MEMORY_CAP = "over audee's memory cap"


def subnormal_rows(meta: dict[str, Any] | None) -> set[int]:
    """The rows of a case's inputs holding values that are or make subnormals
    (:data:`SUBNORMAL_SPECIALS`, as ``meta['special_inputs']`` records them)."""
    special = (meta or {}).get("special_inputs") or []
    if not isinstance(special, list):
        return set()
    return {int(s["row"]) for s in special if isinstance(s, dict) and s.get("kind") in SUBNORMAL_SPECIALS
            and isinstance(s.get("row"), (int, np.integer))}


@dataclass
class TestCase:
    """What is run: a spec, its weights and a batch of inputs, plus where it came from."""

    __test__ = False  # not a pytest class

    id: str
    spec: ModelSpec
    weights: Weights
    inputs: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)  # seed, variant, mutations, rng, ...

    @property
    def batch(self) -> int:
        return int(next(iter(self.inputs.values())).shape[0])


@dataclass
class Outcome:
    """What one backend did with a test case."""

    backend: str
    failure: Any = None                 # audee.backends.pool.WorkerFailure, or None
    logits: np.ndarray | None = None
    output: np.ndarray | None = None
    nonfinite: list[str] = field(default_factory=list)  # layers with NaN/Inf, topological order
    run_s: float = 0.0
    precision: str = "full"             # the backend's compute mode (audee.backends.registry.PRECISIONS)
    #: layer name -> what the program the backend ran shows of how it computes the layer
    #: (audee.backends.info.PROGRAM_FACTS: a converter's graph)
    facts: dict[str, list[str]] = field(default_factory=dict)
    #: layer name -> [declared, computed] ([shape, dtype] each) for every layer whose output is not
    #: what Keras declares for it (audee.oracle.declared); None: the backend ran no model Keras built
    declared: dict[str, list[list[Any]]] | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class Finding:
    """What an oracle found: its kind, the backends involved and the kind's detail
    (:mod:`audee.records.findings`; given as its JSON, it is parsed into the kind's type)."""

    kind: str
    backends: list[str]
    detail: AnyDetail = None  # type: ignore[assignment]  # None or a mapping: parsed in __post_init__

    def __post_init__(self) -> None:
        if not isinstance(self.detail, Detail):
            self.detail = parse_detail(self.kind, self.detail or {})

    @property
    def is_failure(self) -> bool:
        return self.kind in FAILURES

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "backends": list(self.backends), "detail": self.detail.to_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Finding":
        return cls(d["kind"], list(d["backends"]), parse_detail(d["kind"], d.get("detail") or {}))

    def signature(self) -> tuple:
        """What makes two findings 'the same' for reproduction checks: kind and backends."""
        return (self.kind, tuple(sorted(self.backends)))


@dataclass
class Verdict:
    findings: list[Finding]

    @property
    def failed(self) -> bool:
        return any(f.is_failure for f in self.findings)

    @property
    def status(self) -> str:
        if self.failed:
            return "fail"
        if any(f.kind == Kind.CONSISTENT_REJECTION for f in self.findings):
            return "rejected"
        return "pass"

    def kinds(self) -> list[str]:
        return sorted({f.kind for f in self.findings})

    def signatures(self) -> set[tuple]:
        return {f.signature() for f in self.findings if f.is_failure}

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "findings": [f.to_json() for f in self.findings]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Verdict":
        return cls([Finding.from_json(f) for f in d.get("findings", [])])
