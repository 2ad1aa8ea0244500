"""Root causes and classes: how many bugs a run found, as a maintainer counts them.

A *signature* (:mod:`audee.triage.signature`) is one bug as a known issue would match it; many
signatures may come from one fix upstream.  A **root cause** groups them by what a
maintainer would fix (docs/oracles.md, "Root causes and classes"):

* a crash or rejection: its kind, the **component** that failed (a framework, the converter
  ``tf2onnx``, the runtime ``onnxruntime``), the **op**, kernel or Keras layer its error
  names (``Erfc``, ``Conv3DBackpropInput``, ``CategoryEncoding``; an error that names none
  is known by its words alone) and the normalized error **template**; by cause, not words,
  where the words differ for one cause: a runtime refusing a converted graph is the
  converter's, keyed by the graph's **fault** (one node refused at load and at run is one
  root); several backends refusing one case at one layer are the case's, keyed by the
  layer and the input facts; a converter computing what its reference refuses is its own;
* a NaN pattern difference: the **odd backend** (the float64 reference's where it tells,
  :mod:`audee.oracle.pairs`; else the majority's; else the pair, marked ``?``), the layer
  where the patterns first differ, and whether the input held NaN/Inf;
* a deviation, an inconsistency or a precision finding (one family: a label flip is a
  deviation seen through argmax, a precision finding the same loss of accuracy seen against
  float64): the odd backend (the float64 reference's culprit where it named one; else the
  pair) and the layer that deviates on its own input.

A pair's root (the oracle could not tell which of two backends is off) folds into the root of
the same family and layer or op whose odd backend is one of the two, where exactly one exists:
it is that backend's difference seen without a third backend to tell.  A compiled or converted
backend and its reference are never a pair's root: the judged side is the odd one.

What rode along with the failing layer (an activation drawn for it, parameter values)
enters the key only where localization named it (the signature's ``localized`` context).

Each root cause has a **class**, decided by :func:`classify` in this order: a known issue's
``class`` (``documented``, a version pair's difference the newer release documents as a fix
or an intended change, is only a known issue's: :mod:`audee.triage.known`, its ``changed``
rule); ``undefined`` when audee's memory cap stopped it (the case asked for more memory than a
worker may hold); ``harness`` (the failure is raised in audee's own code); ``bug`` for a
converter computing what its reference refuses, whatever values the input holds (``undefined``
only where the generator marked an argument outside the contract or drew a crafty invalid
one: the converter is lenient where no result is defined); ``undefined`` (the case
is outside the documented contract: a value the generator marked outside it, a crafty
invalid parameter value, NaN/Inf inputs to a
difference between independent frameworks (not to a compiled or converted backend's against
its reference, :mod:`audee.oracle.pairs`: the same program must compute the same on them), ids out of range, a pattern difference at the float32 overflow
boundary); ``limitation`` (an explicit "unsupported" error: no op, no kernel, not
implemented, only supports ...); else ``bug``.  A group of signatures takes the class of its
most telling member (:data:`CLASSES` order): one case with valid inputs makes it a bug.
"""
from __future__ import annotations

import re
from typing import Iterable, Protocol

from audee.backends.info import describe
from audee.cases.case import MEMORY_CAP, Kind
from audee.cases.kinds import CRASHES, root_family
from audee.oracle.equivalence import batch_rule
from audee.oracle.pairs import in_contract, judged_side
from audee.triage.signature import (FAILED_ALIKE, FLUSH_REPRODUCES, GRAPH_FAULT, KERAS, OLDER_LACKS_API, OUTSIDE,
                                    REFUSED_BY, REJECTED_AS, REJECTED_BY, RETURNS_INPUT, Signature, explicit_refusal,
                                    invalid_graph_complaint, primary_api)
from audee.triage import (FIXED_UPSTREAM, FOUND_BEFORE, KNOWN_UPSTREAM, NEW, Bug, CrashRoot, NumericRoot, RootCause,
                          RootKey)

#: the root families whose pair roots fold into their odd backend's (:func:`_fold_pairs`)
PAIR_FAMILIES = (root_family(Kind.DEVIATION), root_family(Kind.NAN))
#: a difference between two releases that the newer release documents as a fix or an intended change
DOCUMENTED = "documented"
#: the classes, most telling first: a group takes the first class any member has
CLASSES = ("bug", "harness", "limitation", "undefined", DOCUMENTED)
CLASS_HELP = {
    "bug": "a backend computes something wrong or crashes where its docs promise a result",
    "limitation": "an explicit, documented 'unsupported' error",
    "undefined": "an input outside the documented contract (worth a report only when one backend is "
                 "silently different)",
    "harness": "audee's own fault (its conversion glue, its checks)",
    DOCUMENTED: "a difference between two releases that the newer one's release notes or merged change document as "
                "a fix or an intended change (a known issue's link says where): not a regression",
}

_UNDEFINED_CONTEXT = {"nonfinite_input": "NaN/Inf in the input", "ids_out_of_range": "ids out of range",
                      "overflow_boundary": "at the float32 overflow boundary",
                      "zero_divisor": "an integer division by zero",
                      "empty_reduction": "a reduction without an identity over an empty axis (NumPy refuses it)",
                      "spec_refuses": "Keras's own symbolic call refuses the arguments",
                      "subnormal_input": "subnormal or tiny inputs (TensorFlow and JAX flush subnormals to zero "
                                         "on the CPU by design)",
                      FLUSH_REPRODUCES: "a backend that keeps subnormals computes the odd backend's values once "
                                        "it flushes them (the flush probe)",
                      "index_overflow": "input values no integer holds, cast to indices (a float to int cast out "
                                        "of range is undefined)"}
#: input facts outside the contract of independent frameworks only: a converted program judged
#: against its own reference must compute what it was given, on any input
_BETWEEN_INDEPENDENT = ("nonfinite_input", "index_overflow")


class _Known(Protocol):  # audee.triage.known.KnownIssue, without importing it (known imports this module)
    id: str
    klass: str | None


# What varies between graphs and layers inside one error, and the words every error of a
# framework or runtime carries: folded out of a template, a title and a search query.
_VARYING = [re.compile(p) for p in (
    r"In Node, .*? , Error ",                                   # ONNX: the node's signature before its error
    r"\b(?:in )?[Nn]ode \([^()]*\)\s*",                              # ONNX: the node's name
    r"\s*==> Context:.*$",                                       # ONNX: the enclosing graph (a Loop body)
    r"\[\[\{\{node [^}]*\}\}\]\]", r"\{\{node [^}]*\}\}", r"\[Op:[^\]]*\]",   # TensorFlow node labels
    r"with these attrs: \[[^\]]*\]", r"Registered (?:devices|kernels):.*$",  # TensorFlow kernel listings
    r"\(?<name>: tensor\(\w+\),?\s*|tensor\(\w+\)",                  # ONNX type lists
    r"\x1b\[\d+m|\[\d+m",
    r"\s*Received: [^\n]*")]                                   # Keras: the argument values it refused
_BOILERPLATE = [re.compile(p) for p in (
    r"^\w*(?:Error|Exception|Graph|Fail):\s*", r"\[ONNXRuntimeError\]\s*:\s*<n>\s*:\s*\w+\s*:\s*",
    r"This is an invalid model\.\s*", r"Non-zero status code returned while running \w+ node\.\s*",
    r"Name:<name>\s*", r"Status Message:\s*", r"<path>\s*", r"Graph execution error:\s*",
    r"Exception encountered when calling \w+\.call\(\)\.\s*", r"&lt;|&gt;")]


def _fold(text: str, patterns: list[re.Pattern]) -> str:
    for _ in range(2):
        for p in patterns:
            text = p.sub("", text)
    return " ".join(text.split())


def template(error: str | None) -> str:
    """A normalized error with what varies between layers and graphs folded too (graph node
    names and attributes, ONNX node signatures and type lists): the words that say what
    went wrong, 160 characters at most."""
    return _fold(error, _VARYING)[:160].strip() or "-" if error else "-"


def core_message(error: str | None) -> str:
    """What an error says went wrong, without the words every error of its kind carries
    (the exception type, the runtime's status prefix, node labels): for titles and searches."""
    return _fold(_fold(error or "", _VARYING), _BOILERPLATE)


def _fact(sig: Signature, head: str) -> str | None:
    """The value of a signature's context fact ``head<value>``, or None."""
    return next((c[len(head):] for c in sig.context if c.startswith(head)), None)


def shared_component(backends: Iterable[str]) -> str:
    """Who must fix what several backends refuse alike at one layer: their one component;
    ``keras`` where they are different Keras frameworks (the layer's code is what they
    share: its tracker is Keras's, :data:`audee.report.bugreports.DEFAULT_TRACKERS`); the
    framework where the others run its model (a mode, a converter: TensorFlow refusing and
    onnxruntime failing to convert its graph); the converter where every one runs its graph
    (two runtimes refusing tf2onnx's graph alike while TensorFlow ran); else the failing
    backends."""
    names = sorted({b.split("@")[0] for b in backends})
    blamed = {describe(n).blamed for n in names}
    if len(blamed) == 1:
        return blamed.pop()
    converters = {describe(n).converter for n in names}
    if len(converters) == 1 and None not in converters:
        return str(converters.pop())
    frameworks = {describe(n).keras_backend for n in names}
    if None in frameworks:  # a plugin: no framework to tell
        return ",".join(names) or "-"
    return KERAS if len(frameworks) > 1 else describe(frameworks.pop()).blamed


def _alike_component(sig: Signature) -> str | None:
    """Who must fix an equivalence rule failing alike on several backends (``failed_alike:``):
    the component they share (:func:`shared_component`), else None."""
    alike = _fact(sig, FAILED_ALIKE)
    return shared_component(alike.split(",")) if alike is not None else None


def _input_cause(sig: Signature) -> str:
    """What of a case's input a shared refusal answers, in words without values: the facts
    that put it outside the contract (:func:`classify`'s: why a value is outside it, else a
    crafty invalid parameter, the input facts), or ``the case`` where none is known."""
    ctx = set(sig.context)
    outside = sorted(c[len(OUTSIDE):] for c in ctx if c.startswith(OUTSIDE))
    invalid = sorted(f"an invalid {p}" for c in ctx if c.startswith("invalid:")
                     for p in [c.split(":", 1)[1]] if not any(o.startswith(p + " ") for o in outside))
    return ", ".join([*outside, *invalid, *sorted(c for c in ctx if c in _UNDEFINED_CONTEXT)]) or "the case"


def root_of(sig: Signature) -> RootKey:
    """The root cause a signature belongs to (module docstring)."""
    if sig.kind in CRASHES:  # an error naming no op nor layer is known by its words alone
        shared = _fact(sig, REJECTED_BY)
        if shared is not None:  # several backends refusing one case at one layer: the case's cause, not words
            return CrashRoot(sig.kind, shared_component(shared.split(",")), sig.layer or "-",
                             f"refused alike: {_input_cause(sig)}{_refused_as(sig)}")
        refused_by = _fact(sig, REFUSED_BY)
        if refused_by is not None:  # a converter computing what its reference refuses, at this layer
            return CrashRoot(sig.kind, sig.component or ",".join(sig.backends), sig.layer or "-",
                             f"computes what {refused_by} refuses")
        fault = _fact(sig, GRAPH_FAULT)
        if fault is not None:  # a runtime refusing the converted graph: the node's fault, at load or at run
            return CrashRoot(sig.kind, sig.component or ",".join(sig.backends), sig.op or "-",
                             f"a runtime refuses its graph: {fault}")
        error = sig.error_full or sig.error
        # an invalid converted graph is the converter's one bug, whichever runtimes refuse it
        error = invalid_graph_complaint(error) or error
        return CrashRoot(sig.kind, sig.component or ",".join(sig.backends) or "-", sig.op or "-", template(error))
    what = sig.layer or primary_api(sig.api) or "-"
    if "localized" in sig.context:  # localization named the parameter (a rider too): it matters
        what = (sig.api or what) + "(" + ",".join(f"{p}={v}" for p, v in sig.params) + ")"
    source = None
    if sig.kind == Kind.NAN:
        source = "from NaN/Inf input" if "nonfinite_input" in sig.context else "from finite input"
    if sig.kind == Kind.EQUIVALENCE:  # one rule's failure on one layer API: the rule is part of it
        what += "".join(f"[{v}]" for p, v in sig.params if p == "rule")
        if _fact(sig, REJECTED_BY) is not None:  # backends refusing one side where the other runs: one cause
            side = "the equivalent refused alike where the case runs" if "equivalence:rejected" in sig.context \
                else "refused alike where the equivalent runs"
            return NumericRoot(root_family(sig.kind), (), what, (), side + _refused_as(sig))
        shared = _alike_component(sig)
        if shared is not None:  # the rule failing alike on several backends, none odd: their shared code's
            return NumericRoot(root_family(sig.kind), (), what, (), f"fails alike on {shared}")
        rows_root = _batch_rule_root(sig)
        if rows_root is not None:
            return rows_root
    # the finding kind table's family: numeric, nan, or a family of its own
    return NumericRoot(root_family(sig.kind), sig.odd, what, () if sig.odd else sig.backends, source)


def _batch_rule_root(sig: Signature) -> RootKey | None:
    """The root of a batch rule's failure on its backend (:func:`audee.equivalence.rules.batch_rule`:
    the case's own model on other rows, no layer changed), told by the backend's words or by a
    layer returning its input, not by the layer that met it: one code path that every layer
    reaching it shows (Keras' torch ``max`` refusing any tensor without elements, from
    GlobalMaxPooling1D to 3D; TensorFlow's oneDNN convolutions returning their input, from
    Conv1D to SeparableConv2D).  None for another rule, or a failure without either."""
    rule = next((str(v) for p, v in sig.params if p == "rule"), None)
    if not batch_rule(rule):
        return None
    odd = sig.odd or sig.backends  # the rule is judged on each backend alone: the one that failed it
    if RETURNS_INPUT in sig.context:
        return NumericRoot(root_family(sig.kind), odd, f"[{rule}]", (), "a layer returns its input as it came")
    error = sig.error_full or sig.error
    if error and _fact(sig, REJECTED_BY) is None:
        return NumericRoot(root_family(sig.kind), odd, f"[{rule}]", (), f"refused as: {template(error)}")
    return None


def _refused_as(sig: Signature) -> str:
    """`` as: <template>`` of the first refusing backend's words (``rejected_as:``), so that
    cases refused alike at one layer for different reasons are different roots; empty for a
    signature recorded before the fact."""
    words = _fact(sig, REJECTED_AS)
    return f" as: {template(words)}" if words else ""


def root_key(sig: Signature) -> str:
    """The text of a signature's root (:func:`root_of`), as reports print and hash it."""
    return str(root_of(sig))


def _flushing(odd: Iterable[str]) -> bool:
    """Whether any of ``odd`` is a flushing backend (its description's ``flushes_subnormals``:
    its CPU kernels flush subnormals to zero by design)."""
    return any(describe(str(b)).flushes_subnormals for b in odd)


def _flush_unexplained(sig: Signature) -> bool:
    """Whether flush-to-zero cannot explain a signature's difference on subnormal or tiny
    inputs: a flushing backend is odd and every backend of the signature flushes too (JAX's
    closed-form 2x2 determinant underflowing against TensorFlow, which flushes as well), so
    it stays a bug, unless the flush probe reproduced the odd backend's values by flushing
    (``flush_reproduces``: TensorFlow's STFT of a tiny row against JAX, which never made the
    subnormal intermediates TensorFlow flushed; the api-cpu campaign, rng 2929).  A flushing
    backend odd against one that keeps subnormals (TensorFlow against onnxruntime, which runs
    its graph without flushing, or torch) differs by that choice (rng 2897: AutoContrast on
    a subnormal row)."""
    return _flushing(sig.odd) and all(describe(str(b)).flushes_subnormals for b in sig.backends) \
        and FLUSH_REPRODUCES not in sig.context


def _against_reference(sig: Signature) -> bool:
    """Whether a signature's difference is a compiled or converted backend's against its
    reference, which is not odd itself (:func:`audee.oracle.pairs.in_contract`; a pair of
    the two names no odd backend: its judged side is): NaN/Inf inputs are then in the
    contract, the program the backend was given computes on them."""
    odd = sig.odd
    if not odd and len(sig.backends) == 2:
        side = judged_side(*sig.backends)
        odd = (side,) if side else ()
    return in_contract(odd, sig.backends)


def classify(sig: Signature, issue: _Known | None = None) -> tuple[str, str]:
    """(class, why) of one signature (module docstring); ``issue``: the known issue it
    matches, whose ``class`` decides when given."""
    if issue is not None and getattr(issue, "klass", None):
        return str(issue.klass), f"known issue {issue.id}"
    ctx = set(sig.context)
    if sig.kind in CRASHES and MEMORY_CAP in (sig.error_full or sig.error or ""):
        return "undefined", "the case needs more memory than a worker may hold (audee's memory cap)"
    if "audee_raised" in ctx:
        return "harness", "raised in audee's own code"
    if "within_tolerance" in ctx:
        return "harness", "labels flip on values within the deviation tolerance (a near-tie)"
    if OLDER_LACKS_API in ctx:
        return "limitation", ("the older release has no such function, argument or kernel (new in the newer one): "
                              "nothing regressed")
    refused_by = _fact(sig, REFUSED_BY)
    outside = sorted(c[len(OUTSIDE):] for c in ctx if c.startswith(OUTSIDE))
    invalid = sorted(c.split(":", 1)[1] for c in ctx if c.startswith("invalid:"))
    if refused_by is not None and (outside or invalid):  # lenient on an argument the contract excludes
        why = "; ".join(outside) or "a crafty invalid value of " + ", ".join(invalid)
        return "undefined", (f"outside the contract: {why} ({sig.component or 'the converter'} accepts what its "
                             f"reference {refused_by} refuses)")
    if refused_by is not None:  # the converted program must do what it was given: raise where its reference does
        return "bug", f"{sig.component or 'the converter'} computes what its reference {refused_by} refuses"
    if outside:
        return "undefined", "outside the contract: " + "; ".join(outside)
    if invalid:
        return "undefined", "a crafty invalid value of " + ", ".join(invalid)
    reasons = [text for c, text in _UNDEFINED_CONTEXT.items()
               if c in ctx and not (c == "subnormal_input" and _flush_unexplained(sig))
               and not (c in _BETWEEN_INDEPENDENT and _against_reference(sig))]
    if reasons:
        return "undefined", "; ".join(reasons)
    if sig.kind in CRASHES and explicit_refusal(sig.error_full or sig.error):
        return "limitation", "an explicit 'unsupported' error"
    if sig.kind == Kind.EQUIVALENCE and sig.error and explicit_refusal(sig.error_full or sig.error):
        return "limitation", "the equivalent model is refused with an explicit 'unsupported' error"
    return "bug", "no rule clears it"


def silent_backend(sigs: Iterable[Signature]) -> str | None:
    """The backend that is silently different from the rest, where one is: the lone backend
    that ran what every other refused, or the lone odd backend of a numeric finding."""
    for s in sigs:
        for c in s.context:
            if c.startswith("silent:"):
                return c.split(":", 1)[1]
        if s.kind not in CRASHES and len(s.odd) == 1:
            return s.odd[0]
    return None


def root_causes(bugs: list[Bug]) -> list[RootCause]:
    """Unique bugs (:func:`audee.triage.known.unique_bugs`) grouped by their ``root`` (a known
    issue's link, else :func:`root_of`), a pair's group folded into its odd backend's
    (:func:`_fold_pairs`): one root cause per group, bugs first, new before known, more cases
    first (:func:`_root_cause`)."""
    groups: dict[RootKey, list[Bug]] = {}
    for b in bugs:
        groups.setdefault(b.root, []).append(b)
    _fold_pairs(groups)
    out = [_root_cause(key, members) for key, members in groups.items()]
    return sorted(out, key=lambda g: (CLASSES.index(g.klass), g.status != NEW, -g.cases, str(g.root)))


def _cases(members: list[Bug]) -> int:
    """How many cases are behind ``members``: each once (several backends' signatures of one
    case are one case); summed where a member read back from an older summary has no ids."""
    if all(m.case_ids for m in members):
        return len({c for m in members for c in m.case_ids})
    return sum(m.cases for m in members)


def _root_cause(key: RootKey, members: list[Bug]) -> RootCause:
    """The root cause of ``members`` (in the order they were grouped): the class of the first
    most telling member, with its reason; the first known issue (its status, where it is known)
    any member has; that telling member's kind, layer API, op, component, error, first case
    and repro script (another member's where it has none), so that a bug is shown by a case
    that shows a bug; its signatures, and its cases each counted once; the backends
    and odd backends of all; for an ``undefined`` cause the backend silently different from the
    rest, if any."""
    telling = min(members, key=lambda m: CLASSES.index(m.klass))
    first = telling  # shown by a member of the class it is counted in
    known = next((m for m in members if m.known_id), None)
    sig = first.signature
    klass = telling.klass
    return RootCause(
        root=key, klass=klass, class_reason=telling.class_reason, kind=first.kind,
        api=sig.layer or primary_api(sig.api) or "-", signatures=len(members), cases=_cases(members),
        first_case=first.first_case, known_id=known.known_id if known else None,
        known_status=known.status if known else None, known_where=known.known_where if known else None,
        # a crash root's component is its key's: several backends refusing one case alike share one
        component=key.who if isinstance(key, CrashRoot) and sig.component
        else _alike_component(sig) or sig.component,
        op=sig.op, error=first.error,
        odd=tuple(sorted({b for m in members for b in m.signature.odd})),
        backends=tuple(sorted({b for m in members for b in m.backends})),
        silent=silent_backend(m.signature for m in members) if klass == "undefined" else None,
        case_file=first.case_file, repro=first.repro or next((m.repro for m in members if m.repro), None),
        members=tuple(members))


def _pair_target(key: RootKey, groups: dict[RootKey, list[Bug]]) -> RootKey | None:
    """The root a pair's numeric or NaN root (the oracle could not tell which of the two is
    off) is a view of: for a compiled or converted backend and its reference, the judged
    side's (:func:`audee.oracle.pairs.judged_side`), whether or not it exists yet; else the one
    root of the same family, layer or op (and input) whose odd backend is one of the pair's,
    if exactly one exists.  A root a known issue matched is found by its members' own roots
    (its group is keyed by the issue): a pair folds the same whether the odd backend's root
    is new or known (the api-cpu campaign, rng 2930: a ConvLSTM3D two against two beside
    TensorFlow's root, announced new once that root had an entry)."""
    if not isinstance(key, NumericRoot) or key.family not in PAIR_FAMILIES or key.told:
        return None
    side = judged_side(*key.pair) if len(key.pair) == 2 else None
    views = [key.with_odd(side)] if side is not None else [key.with_odd(b) for b in key.pair]
    found = [g for g in groups if g != key and (g in views or any(root_of(m.signature) in views for m in groups[g]))]
    if side is not None:
        return found[0] if len(found) == 1 else views[0]
    return found[0] if len(found) == 1 else None


def _fold_pairs(groups: dict[RootKey, list[Bug]]) -> None:
    """Fold each pair root into the odd backend's root of the same layer or op (one fix: a
    pair is that backend's difference seen where the oracle had no third backend to tell,
    or where the others differ too; ``nonzero`` on torch gave one odd root and two pairs)."""
    for key in list(groups):
        target = _pair_target(key, groups)
        if target is None:
            continue
        groups.setdefault(target, []).extend(groups.pop(key))


def class_counts(roots: list[RootCause]) -> dict[str, dict[str, int]]:
    """Per class: root causes; new (no triaged entry matches them) and known (every other),
    and known by status (found before, known upstream, fixed upstream)."""
    out = {c: {"root_causes": 0, "new": 0, "known": 0, FOUND_BEFORE: 0, KNOWN_UPSTREAM: 0, FIXED_UPSTREAM: 0}
           for c in CLASSES}
    for g in roots:
        c = out[g.klass]
        c["root_causes"] += 1
        c[g.status] += 1
        c["known"] += g.status != NEW
    return out


def new_bugs_line(roots: list[RootCause]) -> str:
    """The count a maintainer reads first: root causes of class ``bug`` by status, the new
    ones (no triaged entry matches them: each gets a bug report) before the rest; new ones
    whose script was run again alone and did not reproduce are said apart, not counted."""
    c = class_counts(roots)["bug"]
    apart = sum(g.klass == "bug" and g.status == NEW and not g.new_bug for g in roots)
    return (f"new bugs: {c[NEW] - apart} ({FOUND_BEFORE}: {c[FOUND_BEFORE]}, {KNOWN_UPSTREAM}: {c[KNOWN_UPSTREAM]}, "
            f"{FIXED_UPSTREAM}: {c[FIXED_UPSTREAM]})"
            + (f"; {apart} more whose script did not reproduce alone" if apart else ""))
