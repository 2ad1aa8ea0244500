"""The case record: the one type that writes, checks and reads case files.

``audee fuzz`` (and the search stage, and the localization benchmark) write a
:class:`CaseRecord` for every failing test case; ``audee reproduce`` and ``audee
localize`` read one back.  Reading goes through the restricted, bounded unpickler of
:mod:`audee.store.casefile` and then through :meth:`CaseRecord.from_dict`, which checks
every field and names the first wrong one in a one-line :class:`CaseFileError`.

A case file may not choose code: its backends must be built-ins (a built-in label with
its built-in target) unless the user names the plugin (``--allow-plugin MODULE:CLASS``,
or ``--backends`` instead of the recorded ones); see :meth:`CaseRecord.backend_refs`.

On disk a record is a flat dict (``audee.case/2``; ``audee.case/1`` files still load,
with the default tie margin): the fields below, plus the provenance keys (seed, variant,
rng, mutations, input_rows, weight_seed, search, ...) kept in :attr:`CaseRecord.meta`.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
from pydantic import ValidationError

from audee.backends.registry import (BUILTIN, DEFAULT_PRECISION, BackendRef, backend_label, check_env_name,
                                     parse_placement)
from audee.cases.case import TestCase, Verdict
from audee.core.errors import CaseFileError
from audee.cases.kinds import NAMES, parse_detail
from audee.settings import TIE_MARGIN
from audee.store.atomic import write_atomic
from audee.store.casefile import CASE_FORMAT, READ_FORMATS, encode, read_case_bytes

FIELDS = ("format", "created", "id", "spec", "weights", "inputs", "backends", "verdict", "distances", "outputs",
          "versions", "tie_margin", "tolerances", "op")
BUILTIN_TARGETS = frozenset(BUILTIN.values())
FINDING_KINDS = NAMES  # every kind of the finding kind table (audee.cases.kinds)
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")
#: a case id, as audee makes them: ``<seed>-seed``, ``<seed>-v00001``, ``api-<API>-v00001``,
#: ``op-<op>-v00001`` (an op's name may hold dots: ``image.resize``), a search's
#: ``<target>-<kind>-<level>-<fitness>-r<rng>-g001-<digest>``, a benchmark entry's name.  It names
#: files (``cases/<id>.pkl``, a repro script), so: no separator, no space, no quote, no leading dot.
CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]{0,199}$")
#: a distribution's name (``keras``, ``jaxlib``) and its version (PEP 440: ``2.5.1+cu121``)
_DIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,99}$")
#: an op case's tensor name (``x``, ``x1``, ``indices``)
_TENSOR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_CREATED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)?$")
_JSON_DEPTH = 32
_LABEL = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")  # tensorflow, torch@cuda:0:tf32, mypkg.mod:Class


def _shown(text: Any) -> str:
    """A value from the file as it may appear in a one-line error: short, every character
    outside printable ASCII escaped."""
    return ascii(str(text)[:40])[1:-1]


def check_case_id(ident: Any, *, source: str | None = None, field: str = "id") -> str:
    """``ident`` if it is a case id audee could have made (:data:`CASE_ID`), else a one-line
    :class:`CaseFileError`: an id names files and reaches scripts and reports."""
    if not isinstance(ident, str) or not CASE_ID.match(ident):
        shown = repr(ident) if len(repr(ident)) <= 80 else repr(ident)[:77] + "..."
        raise CaseFileError(f"not a case id: {shown} (letters, digits and _ . + = -, at most 200, "
                            "starting with a letter or digit)", source=source, field=field)
    return ident


@dataclass
class CaseRecord:
    """Everything needed to re-run and to localize one test case."""

    id: str
    spec: dict[str, Any]                      # ModelSpec JSON
    weights: dict[str, list[np.ndarray]]
    inputs: dict[str, np.ndarray]             # one array per model input, batch first
    backends: list[BackendRef]                # as the case was run
    verdict: dict[str, Any]                   # Verdict JSON
    versions: dict[str, Any] = field(default_factory=dict)
    distances: dict[str, Any] = field(default_factory=dict)   # {"pairs": ..., "layers": ...}
    outputs: dict[str, Any] = field(default_factory=dict)     # per backend: logits, output
    tie_margin: float = TIE_MARGIN            # the margin the verdict was judged with
    tolerances: dict[str, Any] = field(default_factory=dict)  # deviation oracle: {dtype: {rtol, atol}} judged with
    meta: dict[str, Any] = field(default_factory=dict)        # provenance: seed, variant, rng, mutations, ...
    #: an op-level case: the keras.ops call as data (op, args, kwargs, dtypes; its
    #: tensors are ``inputs``); then ``spec`` and ``weights`` are empty.  Empty for a model.
    op: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    format: str = CASE_FORMAT
    source: str = field(default="", compare=False, repr=False)  # the file it was read from

    def __post_init__(self) -> None:
        clash = sorted(set(self.meta) & set(FIELDS))
        if clash:
            raise ValueError(f"case record {self.id!r}: provenance keys {clash} clash with record fields")
        self._spec_obj = None

    # ---- making one ----------------------------------------------------------------------------
    @classmethod
    def from_result(cls, result: Any, backends: Iterable[BackendRef], versions: dict[str, Any], *,
                    tie_margin: float | None = None, tolerances: dict[str, Any] | None = None,
                    meta: dict[str, Any] | None = None) -> "CaseRecord":
        """The record of an :class:`audee.engine.execute.Result`."""
        case = result.case
        if case.spec is None:  # an op case (audee.engine.opexec.OpResult): the call and each backend's outputs
            return cls(
                id=case.id, spec={}, weights={}, inputs=dict(case.tensors), backends=list(backends),
                verdict=result.verdict.to_json(), versions=versions,
                outputs={b: {"outputs": list(result.outputs[b]), "dtypes": list(result.dtypes[b])}
                         for b in result.outputs},
                tie_margin=float(TIE_MARGIN if tie_margin is None else tie_margin),
                tolerances=dict(tolerances or {}), meta=dict(meta or {}), op=case.call(),
                created=time.strftime("%Y-%m-%dT%H:%M:%S"))
        return cls(
            id=case.id, spec=case.spec.to_json(), weights=case.weights, inputs=case.inputs,
            backends=list(backends), verdict=result.verdict.to_json(), versions=versions,
            distances={"pairs": result.pairs, "layers": result.layer_distances},
            outputs={b: {"logits": o.logits, "output": o.output} for b, o in result.outcomes.items() if o.ok},
            tie_margin=float(TIE_MARGIN if tie_margin is None else tie_margin),
            tolerances=dict(tolerances or {}), meta=dict(meta or {}),
            created=time.strftime("%Y-%m-%dT%H:%M:%S"))

    # ---- the file ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format, "created": self.created, "id": self.id, "spec": self.spec,
            "weights": self.weights, "inputs": self.inputs,
            # the environment by name only: a case file never chooses an interpreter (backend_refs)
            "backends": [{"label": b.label, "target": b.target, "device": b.device, "precision": b.precision,
                          **({"env": b.env} if b.env is not None else {})} for b in self.backends],
            "verdict": self.verdict, "distances": self.distances, "outputs": self.outputs,
            "versions": self.versions, "tie_margin": self.tie_margin, "tolerances": self.tolerances,
            **({"op": self.op} if self.op else {}), **self.meta,
        }

    def to_file(self, path: str | Path) -> Path:
        """Write atomically (as ``audee.case/2``); never a file audee itself would refuse."""
        d = self.to_dict()
        d["format"] = CASE_FORMAT
        d["created"] = self.created or time.strftime("%Y-%m-%dT%H:%M:%S")
        data = encode(d)
        try:
            CaseRecord.from_dict(d, source=str(path))
        except CaseFileError as exc:
            raise ValueError(f"refusing to write an invalid case record: {exc}") from None
        write_atomic(path, data)
        return Path(path)

    @classmethod
    def from_file(cls, path: str | Path) -> "CaseRecord":
        """Read and check a case file; any problem is one :class:`CaseFileError` line."""
        return cls.from_dict(read_case_bytes(path), source=str(path))

    @classmethod
    def from_dict(cls, d: Any, *, source: str = "<case>", new: bool = False) -> "CaseRecord":
        """Check every field of a record's dict form.  ``new``: a record being written
        (``format`` and ``created`` may be absent)."""
        if not isinstance(d, dict):
            raise CaseFileError(f"not an audee case file (top level is {type(d).__name__})", source=source)
        if new:
            d = {"format": CASE_FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **d}
        fmt = d.get("format")
        if fmt not in READ_FORMATS:
            raise CaseFileError(f"not an audee case file (format {fmt!r}, expected one of "
                                f"{', '.join(map(repr, READ_FORMATS))})", source=source, field="format")

        def bad(what: str, where: str) -> CaseFileError:
            return CaseFileError(what, source=source, field=where)

        def need(key: str, typ: type | tuple, default: Any = ...) -> Any:
            if key not in d:
                if default is ...:
                    raise bad("missing", key)
                return default
            if not isinstance(d[key], typ) or isinstance(d[key], bool) and typ is not bool:
                name = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
                raise bad(f"expected {name}, got {type(d[key]).__name__}", key)
            return d[key]

        ident = check_case_id(need("id", str), source=source)
        spec = need("spec", dict)
        weights = need("weights", dict)
        inputs = need("inputs", dict)
        raw_backends = need("backends", list)
        verdict = need("verdict", dict)
        versions = need("versions", dict)
        distances = need("distances", dict, {})
        outputs = need("outputs", dict, {})
        tolerances = need("tolerances", dict, {})
        created = d.get("created", "")
        if not isinstance(created, str):
            raise bad(f"expected str, got {type(created).__name__}", "created")
        if not _CREATED.match(created):
            raise bad(f"expected a time as YYYY-MM-DDTHH:MM:SS, got {created[:40]!r}", "created")
        tie = need("tie_margin", (int, float, np.floating, np.integer), TIE_MARGIN)
        if not math.isfinite(float(tie)) or float(tie) < 0:
            raise bad(f"expected a finite number >= 0, got {tie!r}", "tie_margin")

        for name, arrs in weights.items():
            if not isinstance(arrs, list) or not all(isinstance(a, np.ndarray) for a in arrs):
                raise bad("expected a list of arrays", f"weights.{_shown(name)}")
        _check_verdict(verdict, bad)
        refs = _check_backends(raw_backends, bad)
        _check_versions(versions, bad)
        _check_tolerances(tolerances, bad)

        op = need("op", dict, {})
        rec = cls(id=ident, spec=spec, weights=weights, inputs=inputs, backends=refs, verdict=verdict,
                  versions=versions, distances=distances, outputs=outputs, tie_margin=float(tie),
                  tolerances=tolerances, meta={k: v for k, v in d.items() if k not in FIELDS},
                  op=op, created=created, format=fmt, source=source)
        if op:
            if spec or weights:
                raise bad("an op case holds no model (its spec and weights are empty)", "spec" if spec else "weights")
            _check_op(op, inputs, bad)
        else:
            _check_inputs(rec.model_spec, inputs, bad)
        return rec

    def op_case(self) -> Any:
        """The op case as :class:`audee.mutation.oplevel.OpCase` (op records only)."""
        from audee.cases.opcase import OpCase

        return OpCase(str(self.op["op"]), list(self.op.get("args", [])), dict(self.op.get("kwargs", {})),
                      dict(self.inputs), dict(self.op.get("dtypes", {})), id=self.id, meta=dict(self.meta))

    # ---- using one -----------------------------------------------------------------------------
    @property
    def model_spec(self) -> Any:
        """The spec as an :class:`audee.cases.spec.ModelSpec` (checked; a bad one is a CaseFileError)."""
        if self._spec_obj is None:
            from audee.cases.spec import ModelSpec

            try:
                self._spec_obj = ModelSpec.from_json(self.spec, source="spec")
            except CaseFileError:
                raise
            except Exception as exc:  # SpecError names the spec field; anything else is malformed too
                text = " ".join(str(exc).split()) or type(exc).__name__
                if not text.startswith("spec"):
                    text = f"spec: invalid ({type(exc).__name__}: {text})"
                raise CaseFileError(text, source=self.source or None) from None
        return self._spec_obj

    def test_case(self) -> TestCase:
        return TestCase(self.id, self.model_spec, self.weights, self.inputs, dict(self.meta))

    def verdict_obj(self) -> Verdict:
        return Verdict.from_json(self.verdict)

    def backend_refs(self, allowed_plugins: Iterable[str] = (), envs: Mapping[str, str] | None = None
                     ) -> list[BackendRef]:
        """The recorded backends, to start workers for.  A plugin (a target that is not a
        built-in backend) is refused unless ``allowed_plugins`` names its target: a case
        file may not choose code to run.  Nor an interpreter: a backend recorded in an
        environment (``torch@prev``) runs under the interpreter ``envs`` gives that name
        (``--env prev=/path/to/python``), and is refused without one."""
        allowed = set(allowed_plugins)
        envs = dict(envs or {})
        if not self.backends:
            raise CaseFileError("no backends recorded; name them with --backends", source=self.source or None,
                                field="backends")
        out = []
        for i, ref in enumerate(self.backends):
            if ref.target not in BUILTIN_TARGETS and ref.target not in allowed:
                raise CaseFileError(
                    f"names the plugin {ref.target!r}, and a case file may not choose code to run; if you trust "
                    f"it, rerun with --allow-plugin {ref.target} (or pick backends with --backends)",
                    source=self.source or None, field=f"backends[{i}].target")
            if ref.env is not None:
                if ref.env not in envs:
                    raise CaseFileError(
                        f"{ref.label!r} ran in the environment {ref.env!r}, and a case file may not choose an "
                        f"interpreter: rerun with --env {ref.env}=/path/to/python (or pick backends with --backends)",
                        source=self.source or None, field=f"backends[{i}].env")
                ref = replace(ref, python=envs[ref.env])
            out.append(ref)
        return out


def save_case(path: str | Path, record: Any) -> Path:
    """Write a case record (a :class:`CaseRecord` or its dict form)."""
    if not isinstance(record, CaseRecord):
        record = CaseRecord.from_dict(record, source=str(path), new=True)
    return record.to_file(path)


def load_case(path: str | Path) -> dict[str, Any]:
    """Load and check a case file; its dict form (see :meth:`CaseRecord.from_file` for the record)."""
    return CaseRecord.from_file(path).to_dict()


# ---- field checks --------------------------------------------------------------------------------
def _check_verdict(verdict: dict, bad: Any) -> None:
    findings = verdict.get("findings")
    if not isinstance(findings, list):
        raise bad(f"expected a list, got {type(findings).__name__}", "verdict.findings")
    status = verdict.get("status", "")
    if not isinstance(status, str):
        raise bad(f"expected str, got {type(status).__name__}", "verdict.status")
    for i, f in enumerate(findings):
        where = f"verdict.findings[{i}]"
        if not isinstance(f, dict):
            raise bad(f"expected a mapping, got {type(f).__name__}", where)
        if f.get("kind") not in FINDING_KINDS:
            raise bad(f"unknown finding kind {f.get('kind')!r} (expected one of {', '.join(FINDING_KINDS)})",
                      f"{where}.kind")
        backends = f.get("backends")
        if not isinstance(backends, list) or not all(isinstance(b, str) for b in backends):
            raise bad("expected a list of backend labels", f"{where}.backends")
        if not isinstance(f.get("detail", {}), dict):
            raise bad(f"expected a mapping, got {type(f.get('detail')).__name__}", f"{where}.detail")
        try:  # each kind's detail type (audee.cases.kinds): a wrong value is named here
            parse_detail(f["kind"], f.get("detail") or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise bad(first["msg"], ".".join([f"{where}.detail", *(str(x) for x in first["loc"])])) from None


def _check_backends(raw: list, bad: Any) -> list[BackendRef]:
    refs: list[BackendRef] = []
    for i, b in enumerate(raw):
        where = f"backends[{i}]"
        if not isinstance(b, dict):
            raise bad(f"expected a mapping {{label, target, device}}, got {type(b).__name__}", where)
        for key in ("label", "target", "device"):
            if not isinstance(b.get(key), str) or not b.get(key):
                raise bad("missing or not a string", f"{where}.{key}")
        label, target, device = b["label"], b["target"], b["device"]
        if not _TARGET.match(target):
            raise bad(f"expected package.module:ClassName, got {target!r}", f"{where}.target")
        if not _DEVICE.match(device):
            raise bad(f"expected cpu, cuda or cuda:N, got {device!r}", f"{where}.device")
        precision = b.get("precision", DEFAULT_PRECISION)  # audee.case/2 files before precision modes: full
        if not isinstance(precision, str):
            raise bad("not a string", f"{where}.precision")
        try:
            _, precision = parse_placement(f"{device}:{precision}")
        except ValueError as exc:
            raise bad(str(exc), f"{where}.precision") from None
        env = b.get("env")  # written only for a backend in another environment
        if env is not None:
            try:
                check_env_name(env)
            except ValueError as exc:
                raise bad(str(exc), f"{where}.env") from None
        name = label.partition("@")[0]
        if name in BUILTIN and target != BUILTIN[name]:
            raise bad(f"built-in backend {name!r} must have target {BUILTIN[name]!r}, not {target!r}",
                      f"{where}.target")
        if name not in BUILTIN and name != target or label != backend_label(name, device, precision, env):
            raise bad(f"expected {backend_label(name if name in BUILTIN else target, device, precision, env)!r} "
                      f"(the backend's name, @env, @device and precision as audee writes them), "
                      f"got {_shown(label)!r}", f"{where}.label")
        if label in {r.label for r in refs}:
            raise bad(f"backend {label!r} listed twice", f"{where}.label")
        refs.append(BackendRef(label, target, device, precision, env))
    return refs


def _check_op(op: dict, inputs: dict, bad: Any) -> None:
    """An op record's call: a name of the closed set a call may name (configured ops,
    ``keras.activations`` functions, :func:`audee.cases.opcase.callable_names`: a case names data, never code), its arguments as JSON data, every tensor it names among
    the inputs (a plain array), every dtype one an op case may take."""
    from audee.apis.config import OP_DTYPES
    from audee.cases.opcase import callable_names, refs

    unknown = sorted(set(op) - {"op", "args", "kwargs", "dtypes"})
    if unknown:
        raise bad("unknown key (an op case holds op, args, kwargs, dtypes)", f"op.{unknown[0]}")
    name = op.get("op")
    if not isinstance(name, str) or not name:
        raise bad("expected the keras.ops function's name", "op.op")
    if name not in callable_names():
        raise bad(f"{_shown(name)!r} is not a configured keras.ops function (api_configs/ops/) "
                  f"nor a keras.activations one", "op.op")
    if not isinstance(op.get("args", []), list):
        raise bad("expected a list", "op.args")
    if not isinstance(op.get("kwargs", {}), dict):
        raise bad("expected a mapping", "op.kwargs")
    _check_json(op.get("args", []), "op.args", bad)
    _check_json(op.get("kwargs", {}), "op.kwargs", bad)
    dtypes = op.get("dtypes", {})
    if not isinstance(dtypes, dict):
        raise bad("expected a mapping of tensor to dtype name", "op.dtypes")
    for tensor, dtype in dtypes.items():
        if dtype not in OP_DTYPES:
            raise bad(f"expected one of {', '.join(OP_DTYPES)}, got {_shown(dtype)!r}", f"op.dtypes.{_shown(tensor)}")
    for tensor, arr in inputs.items():
        if not isinstance(tensor, str) or not _TENSOR.match(tensor):
            raise bad(f"not a tensor name: {_shown(tensor)!r}", "inputs")
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
            raise bad("expected an array of numbers", f"inputs.{tensor}")
    for tensor in refs(op.get("args", [])) + refs(list(op.get("kwargs", {}).values())):
        if not isinstance(inputs.get(tensor), np.ndarray):
            raise bad(f"the call names tensor {_shown(tensor)!r}, which the case does not hold", "inputs")


def _check_json(value: Any, where: str, bad: Any, depth: int = 0) -> None:
    """``value`` is JSON data: None, bool, int, float, str, lists and str-keyed mappings of
    them, nested at most :data:`_JSON_DEPTH` deep."""
    if depth > _JSON_DEPTH:
        raise bad(f"nested deeper than {_JSON_DEPTH}", where)
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]", bad, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise bad(f"a key is {type(k).__name__}, expected str", where)
            _check_json(v, f"{where}.{_shown(k)}", bad, depth + 1)
        return
    raise bad(f"expected JSON data (numbers, strings, lists, mappings), got {type(value).__name__}", where)


def _check_versions(versions: dict, bad: Any) -> None:
    """``{backend label: {distribution: version}}``, as the workers report them."""
    for label, dists in versions.items():
        if not isinstance(label, str) or not _LABEL.match(label):
            raise bad(f"expected a backend label, got {_shown(label)!r}", "versions")
        if not isinstance(dists, dict):
            raise bad(f"expected a mapping of distribution to version, got {type(dists).__name__}",
                      f"versions.{label}")
        for dist, version in dists.items():
            if not isinstance(dist, str) or not _DIST.match(dist):
                raise bad(f"not a distribution name: {_shown(dist)!r}", f"versions.{label}")
            if not isinstance(version, str) or not _VERSION.match(version):
                raise bad(f"not a version string: {_shown(version)!r}", f"versions.{label}.{dist}")


def _check_tolerances(tolerances: dict, bad: Any) -> None:
    """``{dtype: {"rtol": .., "atol": ..}}``: finite numbers >= 0 (what the deviation oracle read)."""
    for dtype, tol in tolerances.items():
        where = f"tolerances.{_shown(dtype)}"
        if not isinstance(dtype, str) or not isinstance(tol, dict) or set(tol) - {"rtol", "atol"}:
            raise bad("expected a mapping {rtol, atol}", where)
        for key, v in tol.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(v)) or float(v) < 0:
                raise bad(f"expected a finite number >= 0, got {_shown(v)!r}", f"{where}.{key}")


def _check_inputs(spec: Any, inputs: dict, bad: Any) -> None:
    if not inputs:
        raise bad("empty: a case needs one array per model input", "inputs")
    names = list(spec.input_names)
    extra = sorted(set(map(str, inputs)) - set(names))
    if extra:
        raise bad(f"not a model input (the spec's inputs: {', '.join(names)})", f"inputs.{_shown(extra[0])}")
    n = None
    for inp in spec.inputs:
        where = f"inputs.{inp.name}"
        if inp.name not in inputs:
            raise bad("missing (the spec has this input)", where)
        arr = inputs[inp.name]
        if not isinstance(arr, np.ndarray):
            raise bad(f"expected an array, got {type(arr).__name__}", where)
        if arr.ndim != len(inp.shape) + 1 or tuple(arr.shape[1:]) != tuple(inp.shape):
            raise bad(f"shape {list(arr.shape)} does not fit [batch, {', '.join(map(str, inp.shape))}]", where)
        if arr.shape[0] == 0:
            raise bad("no rows", where)
        if n is not None and arr.shape[0] != n:
            raise bad(f"{arr.shape[0]} rows where other inputs have {n}", where)
        n = arr.shape[0]
