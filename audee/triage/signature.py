"""Bug signatures: what makes two failing cases the same bug.

A failing case has one :class:`Signature` per failure finding: the finding kind, the layer
API held responsible and the parameter values involved, the backends involved, the phase
and, for crashes and rejections, the error message normalized (numbers, addresses, paths,
shapes, quoted names and the case's layer names taken out).  One root cause seen in many
variants collapses into one signature: gelu on any layer, rejected by onnxruntime with the
``No Op registered for Erfc`` error, is one signature.

Where the responsible layer and parameter come from, best first:

1. localization, where it ran (its top source: layer API, parameter, the value blamed);
2. the finding itself: a deviation's first layer deviating on its own input, a NaN's first
   layer on the failing backend, a crash whose message names a layer of the case;
3. the mutation record (``meta['mutations']``): an invalid value is the prime suspect, then
   a mutated value the error message names (``gelu`` in ``.../Gelu/Erfc``), then the
   mutations of the layer named, then categorical values (activations, paddings, ...) the
   seed never used, then every mutation.  A layer a structural mutation inserted or swapped
   in is recorded by its API alone, but all its parameters were drawn with it: they are the
   mutation's values, as an API-level case's are.

Two rules keep variants together: a parameter whose value is itself a Keras function
(``activation``, ``recurrent_activation``) makes that function the responsible API
(``activations.gelu``, whatever layer carries it), and numbers are kept by sign only
(``units=47`` and ``units=222`` are one ``units=+int``): a bug rarely depends on the exact
integer, and an invalid negative value stays apart from a valid positive one.

The one owner of "the same bug"; ``audee.fuzz`` writes each failing row's signatures into
``results.jsonl``, summaries and reports group by :meth:`Signature.key`, known issues
(:mod:`audee.triage.known`) match against signatures and repro scripts are named by :meth:`Signature.slug`.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from audee.apis.config import load_api_configs
from audee.apis.keras_layers import snake_name
from audee.backends.info import all_op_names, all_unsupported, describe, program_of, reference_of
from audee.core.bounded import clean_text, utf8
from audee.cases.case import (EMPTY_REDUCTION, INT_OVERFLOW_SPECIALS, MEMORY_CAP, NONFINITE_SPECIALS, OFFSET_SPECIALS,
                              SPEC_REFUSES, SPECIAL_INT_KINDS, ZERO_DIVISOR, Finding, Kind, subnormal_rows)
from audee.cases.kinds import TRAINING_FAILURES, root_family, with_accumulated
from audee.levels import is_call
from audee.oracle.compute_dtype import FLOAT32, layer_policy
from audee.oracle.pairs import JUDGED_RULE
from audee.records.findings import BackendError, Phase
from audee.records.localization import parse_localization

FUNCTION_PARAMS = ("activation", "recurrent_activation")  # a value that is a Keras function
MAX_ERROR = 240  # characters of a normalized error kept in a key
MAX_ERROR_FULL = 4000  # characters of the whole normalized error kept for matching


@dataclass(frozen=True)
class Signature:
    kind: str
    api: str | None = None
    params: tuple[tuple[str, str], ...] = ()   # sorted (param, value class) pairs
    backends: tuple[str, ...] = ()              # sorted
    phase: str | None = None                    # crash / rejection phase: build, convert, weights, run
    error: str | None = None                    # normalized error message (crashes, rejections)
    # -- what the root cause and the class are decided on (audee.triage.rootcause); not in key() --
    odd: tuple[str, ...] = ()                   # the backends unlike the majority (audee.oracle.odd); () can't tell
    layer: str | None = field(default=None, compare=False)  # the layer API that fails or deviates, no riders
    op: str | None = field(default=None, compare=False)     # the op or kernel the error names (Erfc, Loop, ...)
    component: str | None = field(default=None, compare=False)  # a framework, the converter or the runtime
    error_full: str | None = field(default=None, compare=False)  # the whole normalized error, for matching
    context: tuple[str, ...] = field(default=(), compare=False)  # facts for the class: invalid:<param>, ...

    def __post_init__(self) -> None:
        # an old row's or a plugin's words may hold lone surrogates: a key must always hash and print
        for name in ("error", "error_full"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, clean_text(value, None))

    @property
    def policy(self) -> str:
        """The dtype policy the failing layer ran under (its :data:`POLICY` fact; float32
        where none is recorded)."""
        return next((c[len(POLICY):] for c in self.context if c.startswith(POLICY)), FLOAT32)

    @property
    def program(self) -> tuple[str, ...]:
        """What the odd backend's program shows of how it computes the failing layer (its
        :data:`PROGRAM` facts)."""
        return tuple(c[len(PROGRAM):] for c in self.context if c.startswith(PROGRAM))

    @property
    def masked(self) -> bool:
        """Whether the failing layer was called with a mask: its :data:`MASKED` fact, or the
        API level's record of the mask among its parameters (``call.mask``; rows written
        before the fact)."""
        return MASKED in self.context or any(p == MASK_PARAM for p, _ in self.params)

    @property
    def named_backends(self) -> tuple[str, ...]:
        """The backends a key names: the odd ones where the oracle could tell, else all of
        the finding's (a pairwise deviation of one odd backend is one bug, not three)."""
        return self.odd or self.backends

    def key(self) -> str:
        """A stable string: equal keys, same bug."""
        params = ",".join(f"{p}={v}" for p, v in self.params)
        return " | ".join([self.kind, self.api or "-", params or "-", ",".join(self.named_backends) or "-",
                           self.phase or "-", self.error or "-"])

    def short_hash(self) -> str:
        return hashlib.sha1(utf8(self.key())).hexdigest()[:8]

    def slug(self) -> str:
        """Filename-safe and short, unique by a hash of the key: ``repro/<slug>.py``."""
        api = (self.api or "net").replace("activations.", "")
        words = [self.kind, api, *self.named_backends[:2]]
        text = "-".join(re.sub(r"[^A-Za-z0-9]+", "_", w).strip("_") for w in words if w)
        return f"{text[:60]}-{self.short_hash()}"

    def describe(self) -> str:
        """One line for people: ``Dense(units=+int) on onnxruntime [convert] ValueError: ...``."""
        what = self.api or "?"
        if self.params:
            what += "(" + ", ".join(f"{p}={v}" for p, v in self.params) + ")"
        return what

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key(), "slug": self.slug(), "kind": self.kind, "api": self.api,
                "params": [list(p) for p in self.params], "backends": list(self.backends),
                "phase": self.phase, "error": self.error, "odd": list(self.odd), "layer": self.layer,
                "op": self.op, "component": self.component, "error_full": self.error_full,
                "context": list(self.context)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Signature":
        """A signature from a results row (rows written before the root-cause fields read
        with those fields empty)."""
        return cls(str(d["kind"]), d.get("api"), tuple((str(p), str(v)) for p, v in d.get("params") or []),
                   tuple(sorted(str(b) for b in d.get("backends") or [])), d.get("phase"), d.get("error"),
                   tuple(sorted(str(b) for b in d.get("odd") or [])), _str_or_none(d.get("layer")),
                   _str_or_none(d.get("op")), _str_or_none(d.get("component")), _str_or_none(d.get("error_full")),
                   tuple(str(c) for c in d.get("context") or []))


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


# ---- error messages ----------------------------------------------------------------------------
_OP_NAME = re.compile(r"/([A-Z][A-Za-z0-9]*)(?::\d+)?$")


def _path(m: re.Match) -> str:
    """A file path or a graph node's a/b/c name as ``<path>``, keeping a node name's last part
    where it is an op (``.../BiasAdd``): the op a node of a nested layer computes is as stable
    as the op of a top-level one (``<layer>/BiasAdd``), and says which one failed."""
    op = _OP_NAME.search(m.group(0))
    return f"<path>/{op.group(1)}" if op else "<path>"


_SUBS = [
    (re.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]*/){2,}[\w.-]*(?::\d+)?"), _path),       # file paths, a/b/c names
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    (re.compile(r"__inference_\w+"), "<fn>"),                                          # traced function names
    (re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`"), "<name>"),                      # quoted names
    (re.compile(r"(?<![\w.])\(\s*(?:None|\?|-?\d+)?(?:\s*,\s*(?:None|\?|-?\d+))*\s*,?\s*\)"), "<shape>"),
    (re.compile(r"\[\s*(?:None|\?|-?\d+)(?:\s*,\s*(?:None|\?|-?\d+))*\s*,?\s*\]"), "<shape>"),
    (re.compile(r"\b\d+(?:x\d+)+\b"), "<shape>"),                                      # 1x28x28
    (re.compile(r"\b[A-Za-z][\w]*:\d+\b"), "<name>"),                                  # tensor names x:0
    (re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*_\d+\b"), "<name>"),                  # auto names dense_1
    (re.compile(r"(?<![\w<])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b"), "<n>"),          # numbers
]


def _without_traceback(lines: list[str]) -> list[str]:
    """``lines`` without an embedded Python traceback (TensorFlow's "Detected at node ...
    defined at (most recent call last):" and its ``File`` and code lines): the words that
    say what went wrong come after it."""
    out: list[str] = []
    skipping = False
    for ln in lines:
        if "(most recent call last)" in ln:
            skipping = True
            continue
        if skipping and (re.match(r"\s+File ", ln) or re.match(r"\s{3,}\S", ln)):
            continue
        skipping = False
        out.append(ln)
    return out


def normalize_error(message: str | None, layer_names: Iterable[str] = (), whole: bool = False) -> str | None:
    """A crash or rejection message with what changes from case to case taken out: file
    paths, hex addresses, quoted and tensor names, shapes, numbers and the case's layer
    names.  Keeps the exception type (``InvalidGraph:``) and the stable words.  The head of
    the message (three lines, :data:`MAX_ERROR` characters) for keys; ``whole``: every line,
    up to :data:`MAX_ERROR_FULL` characters, for known-issue matching (a known error may be
    worded past the head)."""
    if not message:
        return None
    message = clean_text(message)  # valid and bounded: the patterns below never see 10 MB
    lines = _without_traceback([ln for ln in message.strip().splitlines() if ln.strip()])
    if not lines:
        return None
    text = " ".join(" ".join(lines if whole else lines[:3]).split())
    names = sorted({n for n in layer_names if n}, key=len, reverse=True)
    if names:
        text = re.sub(r"\b(?:" + "|".join(map(re.escape, names)) + r")(?:_\d+)?\b", "<layer>", text)
    for pattern, repl in _SUBS:
        text = pattern.sub(repl, text)
    text = re.sub(r"(<(\w+)>)(?:\s*[,x]?\s*\1)+", r"\1", text)  # "<n>, <n>, <n>" -> "<n>"
    return text[:MAX_ERROR_FULL if whole else MAX_ERROR].strip()


# An explicit "this is not supported": the words of any library, then each backend's own
# (its description's ``unsupported``: a kernel or op it has not, a converter's missing rule).
UNSUPPORTED = re.compile("|".join((
    r"not supported|[Uu]nsupported|only supports?\b",
    r"[Nn]ot implemented|NotImplementedError|(?:do|does) not yet support|currently only support|is not available on",
    *all_unsupported())))


def explicit_refusal(error: str | None) -> bool:
    """Whether an error is an explicit "this is not supported" (the limitation rule of
    :func:`audee.triage.rootcause.classify`; a refusal that says so is no verdict on the input)."""
    return bool(UNSUPPORTED.search(error or ""))


# ---- the failing op and component -------------------------------------------------------------
# Where an error names the op or kernel that failed, best first: every backend's patterns
# (its description's ``op_names``: a converter's or runtime's node, a TensorFlow kernel, a
# graph node, the Keras layer whose call raised), ranked as one list.
_OP_PATTERNS = [re.compile(p) for p in all_op_names()]
_NOT_OPS = {"Error", "Exception", "Graph", "InvalidGraph", "Fail", "Status", "Message", "Type", "Node", "NodeDef",
            "Detected", "Arguments", "Traceback", "Received", "Expected"}  # Keras: "... Received: x=3"


def op_of(message: str | None) -> str | None:
    """The op, kernel or Keras layer an error message names as the one that failed (see
    ``_OP_PATTERNS``), or None."""
    if not message:
        return None
    text = "\n".join(_without_traceback(str(message).splitlines()))
    for pattern in _OP_PATTERNS:
        for m in pattern.finditer(text):
            op = m.group(1)
            if op not in _NOT_OPS and not op.lower().endswith(("error", "exception", "warning")):
                return op
    return None


def _innermost_frame(traceback: str | None) -> str:
    """The file of a Python traceback's innermost frame (``/`` separated), or ``""``."""
    frames = re.findall(r'File "([^"]+)"', traceback or "")
    return frames[-1].replace("\\", "/") if frames else ""


#: a runtime's refusal of a converted graph that the ONNX checker rejects too (``OnnxRuntimeBackend.refusal``)
_INVALID_GRAPH = re.compile(r"([\w.-]+) produced an invalid ONNX graph \(onnx\.checker: ")


def invalid_graph_complaint(message: str | None) -> str | None:
    """The converter's part of a runtime's refusal of an invalid converted graph ("tf2onnx
    produced an invalid ONNX graph (onnx.checker: ...)", without the runtime's own words),
    or None: every runtime refusing the same invalid graph is one converter bug."""
    m = _INVALID_GRAPH.search(message or "")
    if m is None:
        return None
    end = (message or "").find("); ", m.end())
    return (message or "")[m.start(): end + 1 if end >= 0 else None]


def _gradient_phase(name: Any) -> str | None:
    """``gradient`` when a finding names an op call's gradient (``grad:<tensor>``, the op
    level's gradient phase): a wrong gradient is another bug than a wrong value of the call."""
    return "gradient" if isinstance(name, str) and name.startswith("grad:") else None


#: a signature's context facts (:attr:`Signature.context`) that its root and class are decided on:
#: a runtime refused the converted graph for this fault (``graph_fault:shapes``)
GRAPH_FAULT = "graph_fault:"
#: the backends that rejected one case at one layer, each in its own words: one cause (``rejected_by:jax,torch``)
REJECTED_BY = "rejected_by:"
#: the words of the first of those backends (by name), normalized: the case's cause across cases, so that
#: another case refused by the same backends at the same layer for another reason is another root
REJECTED_AS = "rejected_as:"
#: a converted backend ran what its reference refused (``refused_by:tensorflow``)
REFUSED_BY = "refused_by:"
#: the backends on which one equivalence rule fails alike at one layer of one case, none of them odd
#: (``failed_alike:jax,tensorflow,torch``): one cause, the code they share
FAILED_ALIKE = "failed_alike:"
#: why the generator drew a value outside the contract (the mutation record's ``why``)
OUTSIDE = "outside:"
#: the dtype policy of the layer a finding pins (else the case's), where it is not float32
#: (``policy:mixed_float16``): a half policy decides whether a value overflows, and a backend
#: computing such a layer in float32 has another cause than one computing it wrong
POLICY = "policy:"
#: the layer a finding pins was called with a mask: a backend that applies the mask its own
#: way (a select lowered to arithmetic) differs only there
MASKED = "masked"
#: what the odd backend's program shows of how it computes the layer a finding pins
#: (``program:select_as_arithmetic``, :data:`audee.backends.info.PROGRAM_FACTS`)
PROGRAM = "program:"
#: a program fact of one odd backend that a NaN finding's whole odd set does not share
#: (``program@onnxruntime:max_as_reduce_max`` beside JAX odd too): where a known entry explains the
#: other odd backends, the rest is a cause of its own, and these facts are its program's
#: (:func:`audee.triage.known._causes`)
PROGRAM_OF = "program@"
#: the mutation record's parameter of a layer's mask (audee.mutation.apilevel)
MASK_PARAM = "call.mask"
#: which way a NaN finding's odd backends differ: every one holds fewer non-finite values in its
#: output than every other backend (it kept finite what they lost: a wider intermediate, a NaN
#: dropped) or more (it lost what they kept: a select lowered to arithmetic turning 0 * Inf into
#: NaN); two causes with one odd backend and one layer are told apart by it
ODD_FEWER_NONFINITE = "odd_fewer_nonfinite"
ODD_MORE_NONFINITE = "odd_more_nonfinite"
#: the same where no backend is named odd, for the compiled or converted backends against their
#: references among the backends (onnxruntime and JAX with the same Infs against TensorFlow and
#: torch: onnxruntime holds more than the TensorFlow program it converted)
JUDGED_FEWER_NONFINITE = "judged_fewer_nonfinite"
JUDGED_MORE_NONFINITE = "judged_more_nonfinite"
#: the side of an undecided pair (two independent frameworks, neither named odd) whose output holds more
#: non-finite values (``pair_more_nonfinite:tensorflow``): a known mechanism that adds NaN on that side
#: explains the pair (:meth:`audee.triage.known.KnownMatch.matches` reads the pair from each side)
PAIR_MORE_NONFINITE = "pair_more_nonfinite:"
#: the side of an undecided deviation pair (two backends, neither named odd) that is within no float64
#: result of the layer where the other side is within one (``pair_off_float64:tensorflow``): read as the
#: odd one, off float64 (:data:`ODD_OFF_FLOAT64`), by a known entry (a bfloat16 convolution TensorFlow's
#: oneDNN computes as garbage, torch's too, JAX right: the api-cpu campaign, rng 3026)
PAIR_OFF_FLOAT64 = "pair_off_float64:"
#: the side of a deviation pair that is within no float64 result of the layer where the side a majority named odd
#: is within one (``outvoted_on_float64:torch``): in float16 or bfloat16, where it arises, the odd rule lets no
#: float64 evidence overrule a majority (a side nearer the exact result may only sum wider); an entry naming that
#: side odd explains the pair as well (TensorFlow's and torch's oneDNN bfloat16 convolution wrong alike outvoting
#: JAX, on float64: the api-cpu campaign, rng 3033; :meth:`audee.triage.known.KnownMatch.matches` reads it)
OUTVOTED_ON_FLOAT64 = "outvoted_on_float64:"
#: a NaN finding whose per-layer diagnosis of a backend never came back (``diagnosis_lost:jax``: its worker
#: ended, twice; ``NanPattern.lost``): its pairs went unjudged, so the finding's layer, class and odd
#: backend rest on the other pairs alone, and a maintainer reads it as such
DIAGNOSIS_LOST = "diagnosis_lost:"
#: an equivalence shape finding whose layer computed the shape it was fed (``shapes["input"]``): a
#: kernel returning its input as it came, whichever layer runs it (TensorFlow's oneDNN convolutions
#: on a batch of zero rows, Conv1D to SeparableConv2D, one early return in one source file)
RETURNS_INPUT = "returns_its_input"
#: a NaN finding whose odd backends the oracle named against their references alone: every pair that
#: stood was a compiled or converted backend and its reference (``odd_rule`` "judged against its
#: reference ...", :func:`audee.oracle.pairs.odd_by_reference`), the independent frameworks' pairs cleared
#: (an overflow's order) or agreeing, so no independent framework took a side
JUDGED_ONLY = "judged_only"
#: a deviation at a float16 or bfloat16 layer whose odd backend is off the layer's float64 result where the
#: other side is on it: the odd one computes something else, not the same in a wider dtype
#: (``DeviationDetail.float64_within``)
ODD_OFF_FLOAT64 = "odd_off_float64"
#: an inconsistency whose pair's outputs have different shapes (``InconsistencyDetail.shape_mismatch``):
#: a program computing another shape, not other values (a converted Reshape baked from a stale size)
SHAPE_MISMATCH = "shape_mismatch"
#: a deviation on rows of subnormal or tiny values whose odd backends' values a backend that keeps
#: subnormals reproduces once it flushes them to zero, and the other side's not: the flush, by
#: design, explains the difference (``DeviationDetail.flush_like``, audee.engine.flush_probe)
FLUSH_REPRODUCES = "flush_reproduces"


def _fault(faults: tuple[tuple[str, str], ...], text: str) -> str | None:
    return next((what for what, pattern in faults if re.search(pattern, text)), None)


def graph_fault(backends: Iterable[str], message: str | None) -> str | None:
    """What is wrong with a converted graph that a runtime refused (its description's
    ``graph_faults``: a missing op, operand types, shapes, an invalid graph), or None when
    the failure is no refusal of a converted graph: a refusal the ONNX checker shares (the
    checker's words), or the runtime's own error (its ``runtime_errors``) naming a fault.
    Such a refusal is the converter's, and the fault, not the runtime's words, is its cause:
    one node refused at load and at run is one fault.  Several backends: the first's, as
    :func:`component_of` blames; none where TensorFlow is among them (its failure, which
    the others inherit)."""
    names = sorted({b.split("@")[0] for b in backends})
    if not names or any(describe(n).blamed_first for n in names):
        return None
    info = describe(names[0])
    if info.converter is None or not info.graph_faults:
        return None
    text = message or ""
    complaint = invalid_graph_complaint(text)
    if complaint is not None:  # the ONNX checker rejects the converted graph too (backends/onnx_backend.py)
        return _fault(info.graph_faults, complaint) or _fault(info.graph_faults, text) or "an invalid graph"
    if info.runtime_errors is not None and re.search(info.runtime_errors, text):
        return _fault(info.graph_faults, text)
    return None


def component_of(backends: Iterable[str], phase: str | None, message: str | None, traceback: str | None = None) -> str:
    """What failed, as the maintainer who would fix it sees it: a framework (``tensorflow``,
    ``torch``, ``jax``), the converter (``tf2onnx``: a runtime refuses its graph for a fault
    of the graph, :func:`graph_fault`, at load or at run; or conversion itself raised) or
    the runtime (``onnxruntime`` failing at run on a graph it loaded, for no fault of the
    graph's).  An onnxruntime failure raised inside TensorFlow or Keras (its traceback's
    innermost frame; else its words) is TensorFlow's: the model fails in TensorFlow before
    the converter sees it.  A refusal of a graph the ONNX checker rejects too is the
    converter's, whichever runtime refused it.  Several backends: TensorFlow first
    (onnxruntime inherits its graph), else the first.  Each backend's part in this (its
    converter, its runtime's own error words, the framework whose model it converts) is
    its description's (:mod:`audee.backends.info`)."""
    names = sorted({b.split("@")[0] for b in backends})
    first = [n for n in names if describe(n).blamed_first]  # the others convert its graph
    if first:
        return describe(first[0]).blamed
    name = names[0] if names else "-"
    invalid = _INVALID_GRAPH.search(message or "")
    if invalid:  # the ONNX checker rejects the converted graph: the converter's (backends/onnx_backend.py)
        return invalid.group(1)
    info = describe(name)
    if info.converter is None or info.runtime_errors is None:  # no converter's share to tell apart
        return info.blamed
    text = message or ""
    if re.search(info.runtime_errors, text):
        return info.converter if graph_fault([name], text) else (info.runtime or info.blamed)
    framework = describe(info.keras_backend) if info.keras_backend else None
    inner = _innermost_frame(traceback)
    if phase == "convert" and inner and framework is not None:
        if f"/{info.converter}/" not in inner and (f"/{framework.name}/" in inner or "/keras/" in inner):
            return framework.blamed
    elif phase == "convert" and framework is not None and framework.error_words \
            and re.search(framework.error_words, text) and info.converter not in text:
        return framework.blamed
    return info.converter if phase == "convert" else info.blamed


# ---- parameter values --------------------------------------------------------------------------
def value_class(value: Any) -> str:
    """What of a parameter value a signature keeps: categorical values as they are
    (``'gelu'``, ``True``, ``None``), numbers by sign (``+int``, ``-int``, ``0``, ``+float``),
    sequences element by element."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, float)):
        kind = "int" if isinstance(value, int) else "float"
        if value != value:
            return "nan"
        if value == 0:
            return "0"
        return ("+" if value > 0 else "-") + kind
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(value_class(v) for v in value) + "]"
    if hasattr(value, "item"):
        return value_class(value.item())
    return type(value).__name__


def _api_and_param(api: str | None, param: str, value: Any) -> tuple[str | None, tuple[str, str]]:
    """A function-valued parameter (an activation) makes the function the responsible API."""
    if param in FUNCTION_PARAMS and isinstance(value, str) and value not in ("linear", None):
        return f"activations.{value}", (param, repr(value))
    return api, (param, value_class(value))


# ---- the spec, the finding, the mutation record ------------------------------------------------
def _spec_layers(spec: Any) -> list[dict[str, Any]]:
    """The layers of a ModelSpec or its JSON, each as its JSON (name, api, params, inputs, call)."""
    if spec is None:
        return []
    layers = spec.get("layers", []) if isinstance(spec, dict) else getattr(spec, "layers", [])
    return [layer if isinstance(layer, dict) else layer.to_json() for layer in layers]


def _layers(spec: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """layer name -> (API, params), from a ModelSpec or its JSON."""
    return {str(layer.get("name")): (str(layer.get("api")), dict(layer.get("params") or {}))
            for layer in _spec_layers(spec)}


def _masked_layers(spec: Any) -> set[str]:
    """The layers of a ModelSpec (or its JSON) called with a mask (``call.mask``)."""
    return {str(layer.get("name")) for layer in _spec_layers(spec)
            if isinstance(layer.get("call"), dict) and layer["call"].get("mask")}


def _layer_facts(layer: str | None, layers: dict[str, tuple[str, dict[str, Any]]], masked: set[str],
                 meta: dict[str, Any] | None, made_around: str | None = None) -> list[str]:
    """How the layer a finding pins ran: its dtype policy where not float32 (the layer's own
    ``dtype`` parameter; where no layer is pinned, the case's, ``meta['dtype']`` of an API-level
    case) and whether it was called with a mask (where no layer is pinned, ``made_around``: the
    layer an API-level case was made around; a refusal often names none).  Facts, not key
    parts: a signature's identity and root stay as they were."""
    if layer is not None and layer in layers:
        policy = layer_policy(layers[layer][1])
    else:  # a call's (an op case's) tensors have dtypes, not a policy
        policy = None if _op_case(meta) or not isinstance((meta or {}).get("dtype"), str) else meta["dtype"]
    return ([f"{POLICY}{policy}"] if policy not in (None, FLOAT32) else []) + \
        ([MASKED] if (layer if layer is not None else made_around) in masked else [])


def _mutations(meta: dict[str, Any] | None) -> list[dict[str, Any]]:
    muts = (meta or {}).get("mutations") or []
    return [m for m in muts if isinstance(m, dict) and "layer" in m and "param" in m]


def named_layer(text: str | None, layers: dict[str, Any]) -> str | None:
    """The first layer of the case a message names (``fc1``, Keras's ``fc1_1`` too)."""
    if not text:
        return None
    best = None
    for name in sorted(layers, key=len, reverse=True):
        m = re.search(r"(?<![A-Za-z0-9])" + re.escape(name) + r"(?:_\d+)?(?![A-Za-z0-9])", text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), name)
    return best[1] if best else None


def _seed_values(seed_spec: Any) -> set[tuple[str, str]]:
    """(param, repr value) pairs the seed already runs with (on any layer)."""
    return {(p, repr(v)) for _, (_, params) in _layers(seed_spec).items() for p, v in params.items()}


def _suspects(muts: list[dict[str, Any]], error: str | None, layer: str | None,
              seed_spec: Any = None) -> list[dict[str, Any]]:
    """The mutations most likely behind a failure (see the module doc)."""
    if not muts:
        return []
    invalid = [m for m in muts if m.get("invalid")]
    if invalid:
        return invalid
    if error:
        low = error.lower()
        named = [m for m in muts if isinstance(m.get("new"), str) and len(m["new"]) > 2
                 and re.search(r"(?<![a-z])" + re.escape(m["new"].lower()) + r"(?![a-z])", low)]
        if named:
            return named
    if layer is not None:
        on_layer = [m for m in muts if _of_layer(m, layer)]
        if on_layer:
            return on_layer
    seen = _seed_values(seed_spec)
    categorical = [m for m in muts if isinstance(m.get("new"), str) and (m["param"], repr(m["new"])) not in seen]
    if categorical:
        return categorical
    return muts


def _of_layer(m: dict[str, Any], layer: str) -> bool:
    """Whether a mutation changed a layer or a layer it wraps (``t_td.layer``: the layer a
    TimeDistributed or Bidirectional holds, drawn with it and run inside it)."""
    return m["layer"] == layer or m["layer"].startswith(layer + ".")


def _layer_at(name: str, layers: dict[str, tuple[str, dict]]) -> tuple[str | None, dict]:
    """(API, params) of a layer of the spec, or of one a layer's parameter holds
    (``t_td.layer``: the spec's ``{"api": ..., "params": ...}`` value of that parameter)."""
    if name in layers:
        return layers[name]
    outer, _, param = name.rpartition(".")
    held = _layer_at(outer, layers)[1].get(param) if outer else None
    if isinstance(held, dict) and isinstance(held.get("api"), str):
        return held["api"], dict(held.get("params") or {})
    return None, {}


def _blame(suspects: list[dict[str, Any]], layers: dict[str, tuple[str, dict]]) -> tuple[str | None, tuple]:
    """The APIs and parameter values the suspect mutations drew: a wrapped layer's mutations
    blame the wrapped layer's API (a known cause of that layer is known through any wrapper)."""
    apis, params = set(), set()
    for m in suspects:
        layer_api, layer_params = _layer_at(m["layer"], layers)
        # a layer a structural mutation inserted or swapped in (its record: ``api``): every parameter
        # was drawn with it, as an API-level case's are, so all of them are what the mutation chose
        drawn = layer_params.items() if m["param"] == "api" and layer_params else [(m["param"], m.get("new"))]
        for param, value in drawn:
            api, p = _api_and_param(layer_api, param, value)
            if api:
                apis.add(api)
            params.add(p)
    return ("+".join(sorted(apis)) or None), tuple(sorted(params))


def _layer_blame(layer: str | None, muts: list[dict[str, Any]], layers: dict[str, tuple[str, dict]],
                 error: str | None = None, seed_spec: Any = None) -> tuple[str | None, tuple]:
    """A layer the finding names: its API, and the mutations of that layer (if any)."""
    if layer is None:
        return _blame(_suspects(muts, error, None, seed_spec), layers)
    on_layer = [m for m in muts if _of_layer(m, layer)]
    if on_layer:
        return _blame(_suspects(on_layer, error, layer, seed_spec), layers)
    return layers.get(layer, (None, {}))[0], ()


def _from_localization(localization: Any) -> tuple[str, str, Any] | None:
    """(API, parameter, blamed value) of the top source of a localization: a
    :class:`audee.localize.localizer.Report`, its JSON, or the RQ2 stage's summary."""
    if localization is None:
        return None
    if isinstance(localization, dict):
        localization = parse_localization(localization)
    return localization.top_source()


def primary_api(api: str | None) -> str | None:
    """A blamed API without its riders: ``Conv3DTranspose+activations.relu`` ->
    ``Conv3DTranspose``; an activation alone stays (it is all that was blamed)."""
    if not api:
        return None
    parts = [p for p in api.split("+") if not p.startswith("activations.")]
    return "+".join(parts) or api


def _ran_through(api: str, traceback: str | None) -> bool:
    """Whether a Python traceback runs through the Keras module of layer ``api`` (``GRU``:
    ``keras/src/layers/rnn/gru.py``, ``SimpleRNN``: ``simple_rnn.py``, ``Conv2DTranspose``:
    ``conv2d_transpose.py``): that layer was running when the failure was raised.  A seed
    GRU refused by torch whose drawn activations changed it and the Dense after it is the
    GRU's failure: its call is in the traceback, the Dense's is not."""
    return bool(re.search(r'keras/src/layers/(?:[^/"]+/)*' + re.escape(snake_name(api)) + r'\.py"', traceback or ""))


def _audee_raised(traceback: str | None) -> bool:
    """Whether a failure's innermost frame is audee's own code (its conversion glue, its
    checks): the harness's fault unless a known issue says otherwise."""
    return "/audee/" in _innermost_frame(traceback)


def _op_case(meta: dict[str, Any] | None) -> bool:
    """Whether a case is one call (a ``keras.ops`` or ``keras.activations`` function,
    :func:`audee.levels.is_call`): its tensors are the call's whole input, so a clean refusal
    at run may answer their values (``linalg.eigh`` raising on a NaN where another backend
    returns NaN: undefined), as a model's never does."""
    return is_call(meta)


def _program_context(program: dict[str, dict[str, list[str]]], layer: Any, odd: Iterable[str],
                     nonfinite: dict[str, list[str]], backends: Iterable[str],
                     departs: dict[str, Any] | None = None, one_program: bool = False) -> list[str]:
    """The facts the odd backends' programs show of how they compute ``layer``, a layer where
    they depart from another backend, or a layer on their own NaN's path, non-finite there
    where another backend is finite (``program:<fact>``,
    :data:`audee.backends.info.PROGRAM_FACTS`): a converter's graph selecting by arithmetic
    where the Keras model selects, whether the patterns first differ there or at a layer
    before it (a max pooling that drops the NaN on one backend).  ``departs``: each pair's
    first differing layer (``"a|b"`` -> layer).  A converted MaxPool where the backends part
    and a select lowered 30 layers on both show: the direction of the odd backend's difference
    (:func:`_direction`) tells the kernel that drops a NaN (fewer) from the lowering that leaks
    one (more), as the known entries of each say. ``one_program`` (a NaN finding's odd set): a fact
    counts only where the programs showing it are those of every odd backend."""
    backends = list(backends)
    odd = list(odd)
    at = {name for pair, name in (departs or {}).items() if isinstance(name, str)
          and any(b in pair.split("|") for b in odd)}
    shown: dict[str, set[str]] = {}  # fact -> the odd backends whose program shows it
    for b in odd:
        mine = set(nonfinite.get(b) or ())
        others = [set(nonfinite.get(o) or ()) for o in backends if o != b]
        path = {n for n in mine if any(n not in o for o in others)} | ({layer} if isinstance(layer, str) else set())
        for name in at | path:
            for f in (program.get(b) or {}).get(name, []):
                shown.setdefault(f, set()).add(b)
    if one_program:
        # a fact of one program explains the odd backends that run that program, not an
        # independent framework odd beside them (torch keeping a NaN that TensorFlow's max
        # pooling drops is no converter's select lowering in onnxruntime's graph)
        wanted = {program_of(b) for b in odd}
        own = {f: bs for f, bs in shown.items() if not wanted <= {program_of(b) for b in bs}}
        shown = {f: bs for f, bs in shown.items() if f not in own}
        return [PROGRAM + f for f in sorted(shown)] + sorted(f"{PROGRAM_OF}{b}:{f}" for f, bs in own.items() for b in bs)
    return [PROGRAM + f for f in sorted(shown)]


def _float64_context(within: Mapping[str, list[str]] | None, odd: Iterable[str], backends: Iterable[str]) -> list[str]:
    """``odd_off_float64`` where every other backend of the pair is within its own float64
    result of the layer and no odd one is within any other's (:data:`ODD_OFF_FLOAT64`)."""
    odd = [x for x in odd if x in (within or {})]
    others = [x for x in backends if x not in odd]
    if not within or not odd or not others or not all(x in within for x in others):
        return []
    if all(o in within[o] for o in others) and not any(set(within[x]) & set(others) for x in odd):
        return [ODD_OFF_FLOAT64]
    return []


def _off_float64_side(within: Mapping[str, list[str]] | None, backends: Iterable[str]) -> str | None:
    """The side of a two-backend deviation within no backend's float64 result of the layer where
    the other side is within one (``DeviationDetail.float64_within``: backend -> the backends whose
    float64 result it is within); None otherwise."""
    names = [str(b) for b in backends]
    if len(names) != 2 or not within or not all(b in within for b in names):
        return None
    a, b = names
    return next((x for x, y in ((a, b), (b, a)) if not within[x] and within[y]), None)


def _pair_float64(within: Mapping[str, list[str]] | None, odd: Iterable[str], backends: Iterable[str]) -> list[str]:
    """Where a two-backend deviation has a side off float64 (:func:`_off_float64_side`): with no
    side named odd, :data:`PAIR_OFF_FLOAT64` of it; with the other side named odd,
    :data:`OUTVOTED_ON_FLOAT64` of it; none otherwise."""
    off, odd = _off_float64_side(within, backends), [str(b) for b in odd]
    if off is None:
        return []
    if not odd:
        return [PAIR_OFF_FLOAT64 + off]
    return [OUTVOTED_ON_FLOAT64 + off] if len(odd) == 1 and odd[0] != off and odd[0] in within else []


def _flush_context(like: Iterable[str] | None, odd: Iterable[str], backends: Iterable[str]) -> list[str]:
    """:data:`FLUSH_REPRODUCES` where the flush probe put a flushed run on every odd backend's
    values and on no other backend's."""
    odd = set(odd)
    if like is None or not odd:
        return []
    like = set(like)
    return [FLUSH_REPRODUCES] if odd <= like and not like & (set(backends) - odd) else []


def _case_layer(layers: dict[str, tuple[str, dict[str, Any]]], case_api: str | None) -> str | None:
    """The one layer of the API a case was made around (an API-level case's), or None: where a
    failure names no layer (a runtime's node, outputs of another shape), its program facts are
    read there."""
    made_around = [name for name, (api, _) in layers.items() if api == case_api]
    return made_around[0] if len(made_around) == 1 else None


def _direction(counts: Mapping[str, Mapping[str, int]], odd: Iterable[str], backends: Iterable[str]) -> list[str]:
    """:data:`ODD_FEWER_NONFINITE` or :data:`ODD_MORE_NONFINITE` where the odd backends' output
    counts of non-finite values (``counts``: backend -> {"nan", "+inf", "-inf"}) are all below,
    or all above, every other backend's; none where they overlap or a side has no count.  A
    backend of ``backends`` without a count, where others have one, is finite: records made
    before every backend was counted kept only the non-finite ones (onnxruntime finite where
    TensorFlow and JAX hold NaN is onnxruntime with fewer)."""
    total = {str(b): sum(int(n) for n in c.values()) for b, c in counts.items()}
    if total:
        total = {**{str(b): 0 for b in backends}, **total}
    odd = set(odd)
    mine = [total[b] for b in odd if b in total]
    theirs = [total[b] for b in backends if b not in odd and b in total]
    if not mine or not theirs:
        return []
    if max(mine) < min(theirs):
        return [ODD_FEWER_NONFINITE]
    if min(mine) > max(theirs):
        return [ODD_MORE_NONFINITE]
    return []


def _judged_direction(counts: Mapping[str, Mapping[str, int]], backends: Iterable[str]) -> list[str]:
    """Where no backend is named odd: which way the compiled or converted backends among
    ``backends`` differ from their references there (:func:`_direction` on those alone,
    :data:`JUDGED_FEWER_NONFINITE` / :data:`JUDGED_MORE_NONFINITE`); none without such a pair."""
    names = [str(b) for b in backends]
    judged = [b for b in names if reference_of(b) in names]
    if not judged:
        return []
    refs = sorted({str(reference_of(b)) for b in judged} - set(judged))
    found = _direction(counts, judged, judged + refs)
    return [{ODD_FEWER_NONFINITE: JUDGED_FEWER_NONFINITE, ODD_MORE_NONFINITE: JUDGED_MORE_NONFINITE}[f] for f in found]


def _pair_direction(counts: Mapping[str, Mapping[str, int]], backends: Iterable[str]) -> list[str]:
    """:data:`PAIR_MORE_NONFINITE` of the side holding more non-finite values, where a NaN finding
    names no odd backend between exactly two backends that are no compiled or converted backend
    and its reference (those are judged: :func:`_judged_direction`); none where they hold as many."""
    names = [str(b) for b in backends]
    if len(names) != 2 or any(reference_of(b) in names for b in names):
        return []
    return [PAIR_MORE_NONFINITE + b for b in names if _direction(counts, [b], names) == [ODD_MORE_NONFINITE]]


def _differing_rows(detail: Any) -> list[int] | None:
    """The batch rows where a NaN finding's standing pairs (every pair, where none stands)
    differ; None where a pair does not say (an older record, a difference seen only in the
    layer lists)."""
    standing = detail.standing()
    if not standing or any(p.rows is None for p in standing):
        return None
    return sorted({r for p in standing for r in p.rows})


def _input_elsewhere(detail: Any, rows: list[int] | None) -> bool:
    """Whether the NaN/Inf the input holds is only on rows where the backends agree: a layer
    computes each row of a batch alone, so a difference on a row whose input is finite is no
    answer to another row's NaN, nor to the earlier layers it made non-finite there (rng
    2909: TensorFlow's graph made a NaN on a finite row of a ConvLSTM1D behind a pooling, and
    the input's NaN in another row cleared it).  Unknown (older records): not elsewhere."""
    held = getattr(detail, "input_nonfinite_rows", None)
    return bool(detail.input_nonfinite) and rows is not None and held is not None and not set(rows) & set(held)


def _fed_nonfinite(spec: Any, layer: Any, nonfinite: dict[str, list[str]], backends: Iterable[str]) -> bool:
    """Whether every layer feeding ``layer`` was already non-finite on every backend
    (``nonfinite``: each backend's non-finite layers): the patterns then first differ in
    how the layer carries a NaN or Inf it was given (an identity resize's zero weights times
    Inf), as for a NaN in the model's input, not in a NaN it made from finite values."""
    if not isinstance(layer, str):
        return False
    named = {str(x.get("name")): x for x in _spec_layers(spec)}
    node = named.get(layer)
    if node is None:
        return False
    fed = [str(i) for i in node.get("inputs") or []]
    inner = [i for i in fed if i in named]  # a model input's own values are the input facts
    if not inner or len(inner) < len(fed):
        return False
    names = list(backends)
    return len(names) >= 2 and all(set(inner) <= set(nonfinite.get(b) or ()) for b in names)


def _special_kinds(meta: dict[str, Any] | None, rows: Iterable[int] | None = None,
                   inputs: Iterable[str] | None = None) -> set[str]:
    """The special kinds the case's rows carry (``meta['special_inputs']``: ``[{input, row,
    kind}]``; a batch-wide kind, ``row`` None, on every row), on ``rows`` only (None: any row)
    and of ``inputs`` only (None: any input)."""
    special = (meta or {}).get("special_inputs") or []
    wanted = None if rows is None else {int(r) for r in rows}
    named = None if inputs is None else set(inputs)
    return {str(s.get("kind")) for s in special if isinstance(s, dict)
            and (wanted is None or s.get("row") is None or s.get("row") in wanted)
            and (named is None or s.get("input") in named)} \
        if isinstance(special, list) else set()


def _index_overflow(spec: Any, layer: str | None, meta: dict[str, Any] | None,
                    rows: Iterable[int] | None = None) -> list[str]:
    """``index_overflow`` where a layer that casts input values to integer indices (its config's
    ``value_indices``) reads a model input whose rows the finding names (None: any row) carry
    values no integer holds (:data:`INT_OVERFLOW_SPECIALS`): a float cast out of the integer's
    range is undefined (C++, XLA), so each backend indexes a different bin
    (ContrastLimitedAdaptiveHistogramEqualization casts before it clips to value_range)."""
    layers = _layers(spec)
    if layer not in layers or not _value_indices(layers[layer][0]):
        return []
    fed = {str(x.get("name")): x for x in _spec_layers(spec)}[layer].get("inputs") or []
    if not fed or set(fed) & set(layers):  # it reads what an earlier layer made of the input
        return []
    return ["index_overflow"] if _special_kinds(meta, rows, fed) & set(INT_OVERFLOW_SPECIALS) else []


def _value_indices(api: str | None) -> bool:
    """Whether a layer API turns input values into integer indices (its config's
    ``value_indices``): a clean refusal of a model at it may answer a NaN or Inf the input
    carried (cast to an index, it is undefined), as an op's refusal may."""
    cfg = load_api_configs().get(api or "")
    return bool(cfg is not None and cfg.value_indices)


def _input_context(meta: dict[str, Any] | None, nonfinite: bool, rows: Iterable[int] | None = None,
                   values: bool = True, crash: bool = False) -> list[str]:
    """Facts about the inputs that put a finding outside the documented contract: the
    special values the case's rows carry (``meta['special_inputs']``: ``[{input, row,
    kind}]``), on ``rows`` only where the finding names its rows (None: any row).
    ``values``: whether NaN/Inf inputs count (not for a model's crash: it raises for the
    model, not for a value; an op's clean refusal may be its answer to a NaN, see
    :func:`_op_case`).  Subnormal and tiny values (``subnormal_input``): TensorFlow's and JAX's
    CPU kernels flush subnormals to zero by design (jax-ml/jax#16200), torch does not; a value
    that differs on them is each framework's documented choice, not a bug (a ``crash`` is no
    value: never so).  A large common offset with a small spread (``offset_input``) is a valid
    input that makes a mean or a variance cancel: each framework's order of summation shows."""
    kinds = _special_kinds(meta, rows)
    out = []
    if nonfinite or (values and kinds & set(NONFINITE_SPECIALS)):
        out.append("nonfinite_input")
    if values and not crash and kinds & set(OFFSET_SPECIALS):
        out.append("offset_input")
    if kinds & set(SPECIAL_INT_KINDS):
        out.append("ids_out_of_range")
    subnormal = subnormal_rows(meta)
    if subnormal and not crash and (rows is None or {int(r) for r in rows} <= subnormal):  # every row it names
        out.append("subnormal_input")
    undefined = [str(u) for u in (meta or {}).get("undefined") or []]  # an op case's (audee.oracle.ops)
    if ZERO_DIVISOR in undefined:
        out.append("zero_divisor")
    if EMPTY_REDUCTION in undefined:
        out.append("empty_reduction")
    if any(u.startswith(SPEC_REFUSES) for u in undefined):
        out.append("spec_refuses")
    return out


def signatures_of(finding: Finding | dict[str, Any], spec: Any = None, meta: dict[str, Any] | None = None,
                  localization: Any = None, seed_spec: Any = None, pair_layer: str | None = None,
                  within_tolerance: bool = False) -> list[Signature]:
    """The signatures of one finding (none for a non-failure, nor for non-finite values
    every backend agrees on, nor for those of the one backend that ran where every other
    refused the case: the paper's NaN oracle counts those, they are no evidence against one
    backend, the model's own arithmetic may overflow): one per distinct (phase, error) among
    the backends that rejected a case, one otherwise.  ``spec``: the case's ModelSpec (or JSON); ``meta``: its provenance
    (``mutations``, ``api``, ``special_inputs``); ``localization``: a localization report of
    the case, where it ran; ``pair_layer``: for an inconsistency, the layer its pair's
    deviation finding pins (the layer deviating on its own input); ``within_tolerance``:
    an inconsistency whose pair has no deviation finding, though both outputs have one
    shape and a distance (its labels flip on values the deviation oracle accepts: a
    near-tie the tie margin missed)."""
    if isinstance(finding, dict):
        finding = Finding.from_json(finding)
    if not finding.is_failure:
        return []
    detail = finding.detail
    if finding.kind == Kind.NAN and (detail.agreed or (detail.ran == 1 and not detail.strong)):
        return []  # every backend that ran computes it (one alone: nothing to compare): no backend's bug
    layers = _layers(spec)
    masked = _masked_layers(spec)
    muts = _mutations(meta)
    top = _from_localization(localization)
    backends = tuple(sorted(finding.backends))
    odd = tuple(sorted(str(b) for b in getattr(detail, "odd", None) or []))  # a new kind may not declare it
    if getattr(detail, "culprit", None):  # the float64 reference named the wrong one (audee.oracle.precision)
        odd = tuple(sorted(str(b) for b in detail.culprit))
    case_api = (meta or {}).get("api") if isinstance((meta or {}).get("api"), str) else None
    if not layers and case_api and _op_case(meta):
        layers = {case_api: (case_api, {})}  # an op case: its drawn arguments are the op's "layer"
    invalid = sorted({f"invalid:{m['param']}" for m in muts if m.get("invalid")}) + \
        sorted({f"{OUTSIDE}{m['why']}" for m in muts if m.get("invalid") and m.get("why")})

    def blamed(layer: str | None, error: str | None = None) -> tuple[str | None, tuple]:
        if top is not None:
            api, param, value = top
            api, p = _api_and_param(api, param, value)
            return api, (p,)
        api, params = _layer_blame(layer, muts, layers, error, seed_spec)
        return (api or (case_api if set(layers) == {case_api} else None)), params

    def layer_api(layer: str | None, api: str | None, error: str | None = None,
                  traceback: str | None = None) -> str | None:
        """The layer the finding pins, by API: localization's, the layer named, the API a
        case was made around, the one layer the suspect mutations changed (an activation
        blamed names a function, not the layer that ran it: a seed's LSTM whose
        recurrent_activation was drawn is still an LSTM) or, of several, the one whose
        Keras module the failure's traceback runs through (:func:`_ran_through`), else
        the blamed API without riders."""
        if top is not None:
            return top[0]
        if layer is not None and layer in layers:
            return layers[layer][0]
        if case_api:
            return case_api
        changed = {_layer_at(m["layer"], layers)[0] for m in _suspects(muts, error, None, seed_spec)} - {None}
        if len(changed) > 1 and traceback:
            changed = {a for a in changed if _ran_through(a, traceback)} or changed
        return changed.pop() if len(changed) == 1 else primary_api(api)

    def sig(kind: str, api: str | None, params: tuple, bs: tuple, layer: str | None, phase: str | None = None,
            error: str | None = None, raw: str | None = None, context: list[str] = (),
            odd: tuple[str, ...] = odd, traceback: str | None = None) -> Signature:
        fault = graph_fault(odd or bs, raw) if raw is not None else None
        ctx = tuple(dict.fromkeys([*invalid, *context, *(["localized"] if top is not None else []),
                                   *([GRAPH_FAULT + fault] if fault else []),
                                   *_layer_facts(layer, layers, masked, meta, _case_layer(layers, case_api))]))
        return Signature(kind, api, params, bs, phase, error, odd, layer_api(layer, api, raw, traceback), op_of(raw),
                         component_of(odd or bs, phase, raw, traceback) if raw is not None else None,
                         normalize_error(raw, layers, whole=True) if raw else None, ctx)

    if finding.kind == Kind.DIVERGENT_ACCEPTANCE:
        groups: dict[tuple, list[str]] = {}
        raw: dict[tuple, BackendError] = {}
        for b, e in sorted(detail.errors.items()):
            key = (e.phase, normalize_error(e.message, layers))
            groups.setdefault(key, []).append(b)
            raw.setdefault(key, e)
        if not groups:
            groups[(None, None)] = list(backends)
            raw[(None, None)] = BackendError()
        # the rejecting backends name each signature; a lone backend that ran what the
        # others refused is said apart: it may be silently wrong
        accepted = set(detail.accepted)
        silent = [f"silent:{odd[0]}"] if len(odd) == 1 and odd[0] in accepted else []
        out = []
        for (phase, error), bs in groups.items():
            message = str(raw[(phase, error)].message or "")
            named = named_layer(message, layers)
            api, params = blamed(named, message)
            traceback = raw[(phase, error)].traceback
            values = _op_case(meta) or _value_indices(layer_api(named, api))
            context = (["audee_raised"] if _audee_raised(traceback) else []) + \
                (_input_context(meta, False, values=values, crash=True) if phase in Phase.ON_VALUES else []) + \
                silent + _program_context(detail.program, named or _case_layer(layers, case_api), bs, {}, bs)
            out.append(sig(finding.kind, api, params, tuple(sorted(bs)), named, phase, error, message, context,
                           odd=(), traceback=traceback))
        out = _one_cause(out)
        return out + _converter_acceptance(detail, out, accepted, odd)
    if finding.kind == Kind.HARD_CRASH:
        message = detail.message or ""
        how = detail.how
        error = normalize_error(message, layers)
        error = f"{how}: {error}" if how and error else (error or how)
        named = named_layer(message, layers)
        api, params = blamed(named, message)
        context = _input_context(meta, False, values=False, crash=True) if detail.phase in Phase.ON_VALUES else []
        return [sig(finding.kind, api, params, backends, named, detail.phase, error, message, context)]
    if finding.kind == Kind.NAN:
        layer = detail.departure(layers, finding.backends)
        api, params = blamed(layer)
        fed = _fed_nonfinite(spec, layer, detail.layers, finding.backends)
        rows = _differing_rows(detail)
        elsewhere = _input_elsewhere(detail, rows)
        context = _input_context(meta, (bool(detail.input_nonfinite) or fed) and not elsewhere, rows) + \
            (["overflow_boundary"] if detail.overflow_boundary else []) + \
            (_direction(detail.counts, odd, backends) if odd else
             _judged_direction(detail.counts, backends) + _pair_direction(detail.counts, backends)) + \
            ([JUDGED_ONLY] if odd and str(detail.odd_rule or "").startswith(JUDGED_RULE) else []) + \
            sorted({DIAGNOSIS_LOST + b for p in detail.patterns.values() for b in p.lost or {}}) + \
            _program_context(detail.program, layer, odd, detail.layers, backends,
                             {pair: p.first_layer for pair, p in detail.patterns.items()}, one_program=True)
        return [sig(finding.kind, api, params, backends, layer if isinstance(layer, str) else None,
                    _gradient_phase(layer), context=context)]
    if finding.kind == Kind.DEVIATION:
        own = detail.own_layers
        layer = own[0] if own else detail.first_layer
        pair = detail.pair
        bs = tuple(sorted(pair.split("|"))) if isinstance(pair, str) else backends
        layer = layer if isinstance(layer, str) else None
        api, params = blamed(layer)
        return [sig(finding.kind, api, params, bs, layer, _gradient_phase(detail.tensor),
                    context=_input_context(meta, False, detail.rows) + _index_overflow(spec, layer, meta,
                                                                                       detail.rows)
                    + _program_context(detail.program, layer, odd or bs, {}, bs)
                    + _float64_context(detail.float64_within, odd, bs)
                    + _pair_float64(detail.float64_within, odd, bs)
                    + _flush_context(detail.flush_like, odd, bs))]
    if finding.kind == Kind.EQUIVALENCE:
        # one backend against itself: the rule joins the parameters (padding and channels
        # failing on one layer are two bugs); a refused rewrite keeps its error and phase
        layer = detail.layer or detail.first_layer
        layer = layer if isinstance(layer, str) else None
        api, params = blamed(layer)
        params = tuple(dict.fromkeys([*params, ("rule", str(detail.rule))]))
        raw = detail.message if detail.reason in ("rejected", "crashed", "original_rejected") and detail.message \
            else None
        # a side refused on its values by a layer that casts them to indices (``value_indices``): a NaN or
        # Inf the case carries is its answer, as for a refusal across backends (RandAugment's Equalization
        # refusing one of the two draws on an input holding -inf: the api-cpu campaign, rng 3025)
        indexed = raw is not None and detail.phase in Phase.ON_VALUES and _value_indices(api)
        shapes = detail.shapes or {}
        returns = [RETURNS_INPUT] if shapes.get("input") and list(shapes["input"]) == list(shapes.get("rewrite") or []) \
            else []
        context = [f"equivalence:{detail.reason}"] + returns + (
            _input_context(meta, False, detail.rows) if detail.reason in ("values", "nonfinite") else
            _input_context(meta, False, values=True, crash=True) if indexed else [])
        return [sig(finding.kind, api, params, backends, layer, detail.phase if raw else None,
                    normalize_error(raw, layers) if raw else None, raw, context)]
    if finding.kind in TRAINING_FAILURES:
        # the training phase: the layer its oracle pins; NaN/Inf or special values the
        # inputs carried put it outside the contract as for the forward pass
        layer = getattr(detail, "layer", None)
        layer = layer if isinstance(layer, str) else None
        api, params = blamed(layer)
        nonfinite = bool(getattr(detail, "input_nonfinite", False))
        return [sig(finding.kind, api, params, backends, layer, context=_input_context(meta, nonfinite))]
    if finding.kind == Kind.PRECISION:
        # one backend against the float64 reference: the layer where it loses accuracy alone
        layer = detail.layer or detail.first_layer
        layer = layer if isinstance(layer, str) else None
        api, params = blamed(layer)
        return [sig(finding.kind, api, params, backends, layer, context=_input_context(meta, False, detail.rows))]
    if finding.kind == Kind.REGRESSION:
        # one backend under two releases: the layer the difference pins, the pair by name, the
        # newer side odd; the version pair is its component and part of its key (another pair
        # of releases is another change), with the error of a side that raised
        layer = detail.layer if isinstance(detail.layer, str) else None
        api, params = blamed(layer)
        bs = tuple(sorted(detail.pair.split("|"))) if isinstance(detail.pair, str) else backends
        raw = detail.message or None
        what = detail.component or "-"
        error = f"{what}: {normalize_error(raw, layers)}" if raw else what
        nonfinite = bool(detail.input_nonfinite)
        # the older release refusing a function or an argument it does not have: new in the newer one
        absent = [OLDER_LACKS_API] if raw and detail.older and _raised_side(detail) == detail.older \
            and (_ABSENT_API.search(raw) or explicit_refusal(raw)) else []
        made = sig(finding.kind, api, params, bs, layer, detail.phase if raw else _gradient_phase(detail.tensor),
                   error, raw, _input_context(meta, nonfinite, detail.rows, values=not raw, crash=bool(raw)) + absent)
        return [replace(made, component=detail.component)]
    if finding.kind == Kind.DECLARED_OUTPUT:
        # a layer against Keras' declaration of it: Keras' code whichever backend computes
        # it (the layer's declaration, or that backend's op behind it), the layer it names
        layer = detail.layer if isinstance(detail.layer, str) else None
        api, params = blamed(layer)
        return [replace(sig(finding.kind, api, params, backends, layer), component=KERAS)]
    if finding.kind != Kind.INCONSISTENCY:
        # a kind without rules of its own (a new oracle's): its backends and the layer its
        # detail names, if any (a detail's ``layer`` field), and the localization or mutation record
        layer = getattr(detail, "layer", None)
        api, params = blamed(layer if isinstance(layer, str) else None)
        return [sig(finding.kind, api, params, backends, layer if isinstance(layer, str) else None)]
    # inconsistency: the pair, and localization or the mutation record (of the layer the
    # pair's deviation pins, where it pins one: its flip is that layer's difference)
    pair = detail.pair
    bs = tuple(sorted(pair.split("|"))) if isinstance(pair, str) else backends
    api, params = blamed(pair_layer)
    # outputs of different shapes differ whatever the rows held: that is the fact
    rows_context = [SHAPE_MISMATCH] if detail.shape_mismatch is not None else \
        _input_context(meta, False, detail.inputs)
    # the layer the program facts are read at: the pair's deviation's, else the case's (outputs
    # of another shape pin no layer)
    context = rows_context + (["within_tolerance"] if within_tolerance else []) + \
        _program_context(detail.program, pair_layer or _case_layer(layers, case_api), odd or bs, {}, bs)
    return [sig(finding.kind, api, params, bs, pair_layer, context=context)]


#: Keras' own code as a component (filed in Keras' tracker): a layer computing unlike its own
#: declaration (audee.oracle.declared), or several Keras frameworks refusing one case alike
#: (audee.triage.rootcause.shared_component)
KERAS = "keras"
#: a signature fact: the older release of a version pair has no such function or argument, or
#: refused the case with an explicit "not supported" (a kernel it lacked): the newer one adds it
OLDER_LACKS_API = "older_lacks_api"
#: how Python and Keras say a function or a keyword argument does not exist
_ABSENT_API = re.compile(r"has no attribute|[Uu]nrecognized keyword argument|unexpected keyword argument")


def _raised_side(detail: Any) -> str | None:
    """The side of a regression that raised: recorded, else read from the divergent
    acceptance it was seen as (a run recorded before the side was)."""
    if detail.raised:
        return str(detail.raised)
    for ev in detail.evidence or []:
        errors = (ev.get("detail") or {}).get("errors") if ev.get("kind") == Kind.DIVERGENT_ACCEPTANCE else None
        if isinstance(errors, dict) and len(errors) == 1:
            return str(next(iter(errors)))
    return None


def _one_cause(sigs: list[Signature]) -> list[Signature]:
    """The rejections of one case by several backends, each in its own words, at one layer
    (the one layer the errors name or the case was made around; errors naming none join it):
    one cause, the case's (an axis named twice refused by TensorFlow, torch and JAX alike).
    Each keeps its signature (a known issue still matches its words); all take that layer,
    the input facts any of them has (one case, one input) and ``rejected_by:`` the backends,
    which :func:`audee.triage.rootcause.root_of` keys them by instead of their words.  A
    failure in audee's own code stays apart (the harness's)."""
    joined = [i for i, s in enumerate(sigs) if "audee_raised" not in s.context]
    layers = {sigs[i].layer for i in joined if sigs[i].layer}
    if len(joined) < 2 or len(layers) != 1:
        return sigs
    (layer,) = layers
    rejecters = ",".join(sorted({b for i in joined for b in sigs[i].backends}))
    facts = tuple(dict.fromkeys(c for i in joined for c in sigs[i].context if not c.startswith(GRAPH_FAULT)))
    shared = (*facts, f"{REJECTED_BY}{rejecters}", _rejected_as([sigs[i] for i in joined]))
    return [replace(s, layer=layer, context=shared) if i in joined else s for i, s in enumerate(sigs)]


def _rejected_as(members: list[Signature]) -> str:
    """The ``rejected_as:`` fact of backends refusing one case alike: the normalized words of
    the first of them by name (every member of the case carries the same)."""
    lead = min(members, key=lambda s: (sorted(s.backends), s.error or ""))
    return f"{REJECTED_AS}{lead.error or ''}"


def _converter_acceptance(detail: Any, sigs: list[Signature], accepted: set[str],
                          odd: tuple[str, ...]) -> list[Signature]:
    """A converted backend that ran a case its reference refused, where no independent
    framework ran it (every backend that ran is judged against a reference that refused):
    the converted program computes where the program it was given raises, the converter's
    bug whatever the input (:func:`audee.triage.rootcause.classify`).  Not where the
    reference's refusal is an explicit "unsupported" (the converter may do what the
    reference cannot), audee's own failure or its memory cap: none of them says the input
    is refused.  One signature per such backend, named by it and its converter."""
    if not accepted or any(describe(b).reference not in detail.errors for b in accepted):
        return []  # a backend ran it whose reference did not refuse it (an independent framework, ...)
    out = []
    for b in sorted(accepted):
        info = describe(b)
        ref = info.reference
        error = detail.errors.get(ref) if ref is not None else None
        refusal = next((s for s in sigs if ref in s.backends), None)
        if info.converter is None or error is None or refusal is None or "audee_raised" in refusal.context \
                or explicit_refusal(error.message) or MEMORY_CAP in str(error.message or ""):
            continue
        facts = [c for c in refusal.context if not c.startswith((GRAPH_FAULT, REJECTED_BY))]
        out.append(Signature(Kind.DIVERGENT_ACCEPTANCE, refusal.api, refusal.params, (b,), None,
                             f"computes what {ref} refuses", tuple(o for o in odd if o == b), refusal.layer,
                             None, info.converter, None, (*facts, f"{REFUSED_BY}{ref}")))
    return out


def case_signatures(verdict: Any, spec: Any = None, meta: dict[str, Any] | None = None,
                    localization: Any = None, seed_spec: Any = None) -> list[Signature]:
    """Every failure signature of a verdict (a Verdict or its JSON), duplicates dropped.  An
    inconsistency takes the layer its pair's deviation finding pins (a label flip is the
    deviation seen through argmax: one root cause); one whose pair's deviation the diagnosis
    cleared (``deviation_accumulated``: rounding amplified, an ill-conditioned layer) has none,
    as that deviation has none."""
    findings = verdict.get("findings", []) if isinstance(verdict, dict) else verdict.findings
    findings = [Finding.from_json(f) if isinstance(f, dict) else f for f in findings]
    own: dict[str, str] = {}
    for f in findings:
        if f.kind == Kind.DEVIATION and isinstance(f.detail.pair, str):
            layer = (f.detail.own_layers or [None])[0] or f.detail.first_layer
            if isinstance(layer, str):
                own[f.detail.pair] = layer
    deviating = {f.detail.pair for f in findings if f.kind in with_accumulated(Kind.DEVIATION)}
    # a pair whose deviation the diagnosis cleared (rounding amplified along the model, or an
    # ill-conditioned layer) and none stands: its labels flip on that rounding, no backend's bug
    cleared = {f.detail.pair for f in findings if f.kind == Kind.DEVIATION_ACCUMULATED} - \
        {f.detail.pair for f in findings if f.kind == Kind.DEVIATION}
    out: list[Signature] = []
    for f in findings:
        incons = f.kind == Kind.INCONSISTENCY
        if incons and localization is None and f.detail.pair in cleared and f.detail.shape_mismatch is None:
            continue
        pair_layer = own.get(f.detail.pair) if incons else None
        # the rows that flip are finite on both sides (the label rule) and the deviation oracle judged
        # those rows: a distance made infinite by other rows, non-finite on one side (the NaN oracle's), does
        # not make the flip more than a near-tie (rng 2989: GroupQueryAttention near 40000, 4 ulps apart)
        within = (incons and localization is None and f.detail.pair not in deviating
                  and f.detail.shape_mismatch is None and not math.isnan(float(f.detail.distance or 0.0)))
        for s in signatures_of(f, spec, meta, localization, seed_spec, pair_layer, within):
            if s not in out:
                out.append(s)
    return _equivalence_alike(_every_backend_differs(_flips_read_as_deviation(out)))


def _flips_read_as_deviation(sigs: list[Signature]) -> list[Signature]:
    """A label flip is its pair's deviation seen through argmax: an undecided inconsistency takes
    the side its pair's deviation found off the layer's float64 result (:data:`PAIR_OFF_FLOAT64`;
    the inconsistency records no float64 result), so the two stay one root when an entry reads
    that side; one whose named odd side is on it and the other off it takes that other side
    (:data:`OUTVOTED_ON_FLOAT64`) alike."""
    off = {(s.backends, s.layer, s.odd): c for s in sigs if s.kind == Kind.DEVIATION
           for c in s.context if c.startswith((PAIR_OFF_FLOAT64, OUTVOTED_ON_FLOAT64))}
    return [replace(s, context=(*s.context, off[(s.backends, s.layer, s.odd)]))
            if s.kind == Kind.INCONSISTENCY and (s.backends, s.layer, s.odd) in off else s for s in sigs]


#: an equivalence finding where one of the two models runs and the backend refuses the other
_ONE_SIDE_REFUSED = ("equivalence:original_rejected", "equivalence:rejected")


def _equivalence_alike(sigs: list[Signature]) -> list[Signature]:
    """One rule's equivalence findings of one case at one layer, one per backend, for the same
    reason: one cause, as :func:`_one_cause` makes of one case's refusals, not one per backend.
    Each keeps its signature (an entry still matches it) and takes a fact naming the backends,
    which :func:`audee.triage.rootcause.root_of` keys them by instead:

    * backends each refusing, in their own words, one side where the other runs (the case:
      ``equivalence:original_rejected``; the rewrite: ``equivalence:rejected``) take
      ``rejected_by:`` and ``rejected_as:``;
    * backends computing the layer unlike its equivalent alike, none named odd (the rule fails on
      every backend judged: the Keras code they share; or no majority holds it), take
      ``failed_alike:``: MultiHeadAttention's sliding window dropped on all four backends of the
      api-cpu campaign's rng 3010 was four new roots for one fix."""
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(sigs):
        reason = next((c for c in s.context if c.startswith("equivalence:")), None)
        if s.kind == Kind.EQUIVALENCE and s.layer and (reason in _ONE_SIDE_REFUSED or not s.odd):
            groups.setdefault((reason, s.layer, s.params), []).append(i)
    out = list(sigs)
    for (reason, _, _), members in groups.items():
        backends = ",".join(sorted({b for i in members for b in sigs[i].backends}))
        if "," not in backends:
            continue
        facts = (f"{REJECTED_BY}{backends}", _rejected_as([sigs[i] for i in members])) \
            if reason in _ONE_SIDE_REFUSED else (f"{FAILED_ALIKE}{backends}",)
        for i in members:
            out[i] = replace(sigs[i], context=(*sigs[i].context, *facts))
    return out


#: the root families whose findings are one per pair of backends
_PAIRWISE = frozenset({root_family(Kind.DEVIATION), root_family(Kind.TRAIN_DEVIATION)})


def _every_backend_differs(sigs: list[Signature]) -> list[Signature]:
    """Pairwise differences of one case at one layer where no backend is odd (each differs
    from each: no majority, no reference) are one disagreement, not one per pair: a root
    cause names the case's cause, and three backends apart on one chaotic layer are one thing
    to look at.  Merged into the first pair's signature with every backend of the pairs."""
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(sigs):
        if not s.odd and len(s.backends) == 2 and root_family(s.kind) in _PAIRWISE:
            groups.setdefault((s.kind, s.api, s.layer, s.params, s.context), []).append(i)
    merged: dict[int, Signature] = {}
    for members in groups.values():
        if len(members) > 1:
            union = tuple(sorted({b for i in members for b in sigs[i].backends}))
            merged[members[0]] = replace(sigs[members[0]], backends=union)
            merged.update({i: None for i in members[1:]})
    return [merged.get(i, s) for i, s in enumerate(sigs) if merged.get(i, s) is not None]
