"""Root causes and classes: how many bugs a run found, as a maintainer counts them.

A *signature* (:mod:`audee.signature`) is one bug as a known issue would match it; many
signatures may come from one fix upstream.  A **root cause** groups them by what a
maintainer would fix (docs/oracles.md, "Root causes and classes"):

* a crash or rejection: its kind, the **component** that failed (a framework, the converter
  ``tf2onnx``, the runtime ``onnxruntime``), the **op**, kernel or Keras layer its error
  names (``Erfc``, ``Conv3DBackpropInput``, ``CategoryEncoding``; an error that names none
  is known by its words alone) and the normalized error **template**;
* a NaN pattern difference: the **odd backend** (else the pair, marked ``?``), the layer
  where the patterns first differ, and whether the input held NaN/Inf;
* a deviation, an inconsistency or a precision finding (one family: a label flip is a
  deviation seen through argmax, a precision finding the same loss of accuracy seen against
  float64): the odd backend (the float64 reference's culprit where it named one; else the
  pair) and the layer that deviates on its own input.

A pair's root (the oracle could not tell which of two backends is off) folds into the root of
the same family and layer or op whose odd backend is one of the two, where exactly one exists:
it is that backend's difference seen without a third backend to tell.

What rode along with the failing layer (an activation drawn for it, parameter values)
enters the key only where localization named it (the signature's ``localized`` context).

Each root cause has a **class**, decided by :func:`classify` in this order: a known issue's
``class``; ``undefined`` when audee's memory cap stopped it (the case asked for more memory than a
worker may hold); ``harness`` (the failure is raised in audee's own code); ``undefined`` (the case
is outside the documented contract: a crafty invalid parameter value, NaN/Inf inputs to a
NaN-pattern difference, ids out of range, a pattern difference at the float32 overflow
boundary); ``limitation`` (an explicit "unsupported" error: no op, no kernel, not
implemented, only supports ...); else ``bug``.  A group of signatures takes the class of its
most telling member (:data:`CLASSES` order): one case with valid inputs makes it a bug.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Protocol

from audee.case import MEMORY_CAP, Kind
from audee.kinds import CRASHES, root_family
from audee.signature import Signature, invalid_graph_complaint, primary_api

#: the classes, most telling first: a group takes the first class any member has
CLASSES = ("bug", "harness", "limitation", "undefined")
CLASS_HELP = {
    "bug": "a backend computes something wrong or crashes where its docs promise a result",
    "limitation": "an explicit, documented 'unsupported' error",
    "undefined": "an input outside the documented contract (worth a report only when one backend is "
                 "silently different)",
    "harness": "audee's own fault (its conversion glue, its checks)",
}

# An explicit "this is not supported" from a framework, converter or runtime.
UNSUPPORTED = re.compile(
    r"No Op registered for|No OpKernel was registered|when using the \w+ backend|"  # Keras: a backend's own refusal
    r"Could not find device for node[\s\S]*?All kernels registered for op|"  # TF eager: no kernel for the dtype
    r"not supported|[Uu]nsupported|only supports?\b|"
    r"[Nn]ot implemented|NotImplementedError|UnimplementedError|do not yet support|currently only support|"
    r"is not available on|"
    r"NOT_IMPLEMENTED : Could not find an implementation for|"  # onnxruntime: no kernel for the op and type
    r"neither a custom op nor a flex op|"       # the TFLite converter: no builtin op (Flex is off)
    r"No conversion rule found for operations")  # OpenVINO's ONNX frontend: an op it has no translator for
_UNDEFINED_CONTEXT = {"nonfinite_input": "NaN/Inf in the input", "ids_out_of_range": "ids out of range",
                      "overflow_boundary": "at the float32 overflow boundary",
                      "zero_divisor": "an integer division by zero",
                      "empty_reduction": "a reduction without an identity over an empty axis (NumPy refuses it)",
                      "spec_refuses": "Keras's own symbolic call refuses the arguments",
                      "subnormal_input": "subnormal or tiny inputs (TensorFlow and JAX flush subnormals to zero "
                                         "on the CPU by design)"}


def explicit_refusal(error: str | None) -> bool:
    """Whether an error is an explicit "this is not supported" (the limitation rule)."""
    return bool(UNSUPPORTED.search(error or ""))


class _Known(Protocol):  # audee.known.KnownIssue, without importing it (known imports this module)
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


def _who(sig: Signature) -> str:
    return ",".join(sig.odd) if sig.odd else "?" + ",".join(sig.backends)


def root_key(sig: Signature) -> str:
    """The root cause a signature belongs to (module docstring)."""
    if sig.kind in CRASHES:  # an error naming no op nor layer is known by its words alone
        error = sig.error_full or sig.error
        # an invalid converted graph is the converter's one bug, whichever runtimes refuse it
        error = invalid_graph_complaint(error) or error
        return " | ".join([sig.kind, sig.component or ",".join(sig.backends) or "-", sig.op or "-",
                           template(error)])
    what = sig.layer or primary_api(sig.api) or "-"
    if "localized" in sig.context:  # localization named the parameter (a rider too): it matters
        what = (sig.api or what) + "(" + ",".join(f"{p}={v}" for p, v in sig.params) + ")"
    if sig.kind == Kind.NAN:
        source = "from NaN/Inf input" if "nonfinite_input" in sig.context else "from finite input"
        return " | ".join([root_family(sig.kind), _who(sig), what, source])
    family = root_family(sig.kind)  # the finding kind table's: numeric, or a family of its own
    if sig.kind == Kind.EQUIVALENCE:  # one rule's failure on one layer API: the rule is part of it
        what += "".join(f"[{v}]" for p, v in sig.params if p == "rule")
    return " | ".join([family, _who(sig), what])


def known_root(link: str) -> str:
    """The root cause of every signature matching a known issue at ``link``: one upstream
    issue is one fix, however many entries, backends or error texts reach it."""
    return f"known | {link}"


#: the backends whose CPU kernels flush subnormals to zero by design (their modes too: ``tensorflow-xla``)
FLUSHING = ("tensorflow", "jax")


def _flushing(odd: Iterable[str]) -> bool:
    """Whether a flushing backend is odd alone among backends that flush too: then its
    difference on subnormal or tiny inputs is not flush-to-zero (JAX's closed-form 2x2
    determinant underflowing where TensorFlow and torch agree), so it stays a bug."""
    return any(str(b).split("@")[0].startswith(FLUSHING) for b in odd)


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
    invalid = sorted(c.split(":", 1)[1] for c in ctx if c.startswith("invalid:"))
    if invalid:
        return "undefined", "a crafty invalid value of " + ", ".join(invalid)
    reasons = [text for c, text in _UNDEFINED_CONTEXT.items()
               if c in ctx and not (c == "subnormal_input" and _flushing(sig.odd))]
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


def root_causes(bugs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Unique bugs (:func:`audee.known.unique_bugs`, each with its ``signature``) grouped by
    their ``root`` (:func:`known_root` for a known issue, else :func:`root_key`): one entry per root cause with its class (the most telling of its
    signatures'), its signatures, cases (summed: a case may count under several), the
    backends involved and the odd ones, the component and op, ``known`` when any signature
    matches a known issue, and for ``undefined`` causes the backend silently different
    from the rest, if any."""
    groups: dict[str, dict[str, Any]] = {}
    for b in bugs:
        sig: Signature = b["signature"]
        key = b.get("root") or root_key(sig)  # audee.known.unique_bugs: a known issue's link, else root_key
        one = {"root": key, "kind": b["kind"], "api": sig.layer or primary_api(sig.api) or "-", "op": sig.op,
               "component": sig.component, "error": b["error"], "signatures": 1, "cases": b["cases"],
               "backends": set(b["backends"]), "odd": set(sig.odd), "class": b["class"],
               "class_reason": b["class_reason"], "known_id": b["known_id"], "first_case": b["first_case"],
               "case_file": b.get("case_file"), "repro": b["repro"], "slug": b["slug"], "members": [sig]}
        if key in groups:
            _absorb(groups[key], one)
        else:
            groups[key] = one
    _fold_pairs(groups)
    out = []
    for g in groups.values():
        g["backends"] = sorted(g["backends"])
        g["odd"] = sorted(g["odd"])
        g["silent"] = silent_backend(g.pop("members")) if g["class"] == "undefined" else None
        g["status"] = "known" if g["known_id"] else "new"
        out.append(g)
    return sorted(out, key=lambda g: (CLASSES.index(g["class"]), g["status"] != "new", -g["cases"], g["root"]))


def _pair_target(key: str, groups: dict[str, dict[str, Any]]) -> str | None:
    """The root a pair's numeric or NaN root (``... | ?a,b | what ...``: the oracle could not
    tell which of the two is off) is a view of: the one root of the same family, layer or op
    (and input) whose odd backend is one of the pair's, if exactly one exists."""
    parts = key.split(" | ")
    if len(parts) < 3 or parts[0] not in ("numeric", "nan") or not parts[1].startswith("?"):
        return None
    found = [k for k in (" | ".join([parts[0], b, *parts[2:]]) for b in parts[1][1:].split(",")) if k in groups]
    return found[0] if len(found) == 1 else None


def _fold_pairs(groups: dict[str, dict[str, Any]]) -> None:
    """Fold each pair root into the odd backend's root of the same layer or op (one fix: a
    pair is that backend's difference seen where the oracle had no third backend to tell,
    or where the others differ too; ``nonzero`` on torch gave one odd root and two pairs)."""
    for key in list(groups):
        target = _pair_target(key, groups)
        if target is None:
            continue
        _absorb(groups[target], groups.pop(key))


def _absorb(into: dict[str, Any], g: dict[str, Any]) -> None:
    """Add root group ``g`` to ``into``: its signatures, cases (summed: a case may count under
    several), backends, odd backends and members; the more telling class; a known id and a
    repro script where ``into`` has none."""
    into["signatures"] += g["signatures"]
    into["cases"] += g["cases"]
    into["backends"].update(g["backends"])
    into["odd"].update(g["odd"])
    into["members"].extend(g["members"])
    if CLASSES.index(g["class"]) < CLASSES.index(into["class"]):
        into["class"], into["class_reason"] = g["class"], g["class_reason"]
    into["known_id"] = into["known_id"] or g["known_id"]
    into["repro"] = into["repro"] or g["repro"]


def class_counts(roots: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per class: root causes, new (not matched upstream) and known."""
    out = {c: {"root_causes": 0, "new": 0, "known": 0} for c in CLASSES}
    for g in roots:
        c = out[g["class"]]
        c["root_causes"] += 1
        c["new" if g["status"] == "new" else "known"] += 1
    return out


ROOT_FIELDS = ("class", "status", "known_id", "kind", "component", "op", "api", "odd", "backends", "silent",
               "signatures", "cases", "first_case", "class_reason", "error", "root")


def roots_json(roots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Root causes as a summary keeps them (plain JSON)."""
    return [{k: g.get(k) for k in ROOT_FIELDS} for g in roots]
