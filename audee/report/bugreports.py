"""One upstream-ready report per new bug: ``report/bugs/<root>.md``.

A root cause of class ``bug`` that no known issue matches (:mod:`audee.triage.rootcause`) is what a
maintainer would want filed.  Its report holds what the tracker asks for: a title in the
tracker's style, the versions the case ran on, the standalone repro script inline, what
was expected against what happened (numbers from the case file's verdict), the class and
why, and a search query to look for an existing upstream issue first.
"""
from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any, Callable

from audee.backends.info import all_query_noise, all_version_keys, first_blamed, trackers_of
from audee.backends.registry import env_of
from audee.cases.kinds import Kind
from audee.oracle.declared import shape_text
from audee.core.bounded import utf8
from audee.triage.rootcause import core_message
from audee.store.atomic import write_atomic
from audee.triage import RootCause, RootKey

log = logging.getLogger(__name__)

#: where a component no backend's description files is searched
DEFAULT_TRACKERS = ("keras-team/keras",)
#: the packages whose versions a report prints: the backends' (their descriptions'), with Python and NumPy
VERSION_KEYS = ("python", *all_version_keys(), "numpy")


def trackers(component: str) -> tuple[str, ...]:
    """Where a component's bugs are filed, the first searched first (a backend's or a
    converter's description, :func:`audee.backends.info.trackers_of`)."""
    return trackers_of(component) or DEFAULT_TRACKERS


def root_slug(root: RootCause) -> str:
    """A file name for a root cause: its kind, who is odd, its op or layer, and a hash of its key."""
    who = root.component or "-".join(root.odd) or "pair"
    what = root.op or root.api or "net"
    text = "-".join(re.sub(r"[^A-Za-z0-9]+", "_", str(w)).strip("_") for w in (root.kind, who, what))
    return f"{text[:60]}-{hashlib.sha1(utf8(str(root.root))).hexdigest()[:8]}"


def _tracker_component(root: RootCause) -> str:
    if root.component:
        return root.component
    return root.odd[0].split("@")[0] if len(root.odd) == 1 else first_blamed()


def search_queries(root: RootCause) -> list[str]:
    """One query per tracker the component's bugs are filed in (:func:`trackers`)."""
    return [search_query(root, repo) for repo in trackers(_tracker_component(root))]


def search_query(root: RootCause, repo: str | None = None) -> str:
    """A query for the tracker's issue search: the repository, the op or layer, and the
    error's stable words (placeholders and punctuation dropped)."""
    repo = repo or trackers(_tracker_component(root))[0]
    words = re.sub(r"<\w+>|\[[^\]]*\]|[^A-Za-z0-9_ ]", " ", core_message(root.error)).split()
    stop = {"Error", "error", "the", "of", "in", "for", "is", "a", "an", "and", "to", "with", "was", "by", "n",
            "void", "ptrdiff_t", *all_query_noise()}
    key = [w for w in words if w not in stop and not w.endswith(("Error", "Exception")) and len(w) > 1][:6]
    what = root.op or root.api or ""
    if not key:
        key = {"nan": ["NaN"], "deviation": ["different", "results"],
               "inconsistency": ["different", "results"]}.get(root.kind, [])
    return " ".join([f"repo:{repo}", "is:issue", what, *key]).strip()


def title(root: RootCause) -> str:
    """A one-line title as the tracker's issues are written."""
    what = root.op or root.api or "model"
    odd = ", ".join(root.odd) or None
    others = [b for b in root.backends if b not in root.odd]
    if root.kind == "nan":
        if odd is None:
            return f"{root.api or what} returns different NaN/Inf values on {' and '.join(root.backends)}"
        return (f"{root.api or what} returns different NaN/Inf values on {odd} than on "
                f"{', '.join(others) or 'the other backends'}")
    if root.kind in ("deviation", "inconsistency"):
        return (f"{root.api or what} gives different results on {odd or ' vs '.join(root.backends)}"
                + (f" than on {', '.join(others)}" if odd and others else ""))
    if root.kind == "regression":  # one backend under two releases: the component is the version pair
        return f"{root.api or what} computes differently under {root.component or ' vs '.join(root.backends)}"
    if root.kind == "declared_output":  # a layer against its own declaration (audee/oracle/declared.py)
        return (f"{root.api or what} computes another output shape or dtype than it declares on "
                f"{odd or ', '.join(root.backends)}")
    if root.kind in ("train_deviation", "train_nan"):  # the training phase (audee/train/)
        how = "NaN/Inf in a training step" if root.kind == "train_nan" else "a different training step"
        return (f"{root.api or what}: {how} on {odd or ' vs '.join(root.backends)}"
                + (f" than on {', '.join(others)}" if odd and others else ""))
    component = root.component or ", ".join(root.backends)
    layer = root.api if root.api not in (None, what) else None
    error = core_message(root.error)[:120].rstrip(" .,")
    return f"[{component}] {what}{f' ({layer})' if layer else ''}: {error}"


def _case(root: RootCause) -> Any:
    """The first case's record, through the restricted loader (None if unreadable)."""
    from audee.store.caserecord import CaseRecord

    path = root.case_file
    if not path or not Path(path).is_file():
        return None
    try:
        return CaseRecord.from_file(path)
    except Exception as exc:  # a case file audee cannot read is reported, not fatal  # noqa: BLE001
        log.warning("%s: not read for its bug report: %s", path, exc)
        return None


def _versions(record: Any) -> list[str]:
    versions = getattr(record, "versions", None) or {}
    if any(env_of(str(label)) for label in versions):  # backends in several environments: each its own
        return [f"- {label}: " + ", ".join(f"{k} {v[k]}" for k in VERSION_KEYS if k in v)
                for label, v in versions.items() if isinstance(v, dict)]
    flat: dict[str, Any] = {}
    for k, v in versions.items():
        if isinstance(v, dict):
            flat.update(v)
        else:
            flat[k] = v
    lines = [f"- {k} {flat[k]}" for k in VERSION_KEYS if k in flat]
    return lines or ["- (the case file records no versions)"]


#: each failure kind's lines of evidence in a bug report, from one finding of it: registered
#: per kind (:func:`_evidence`), every failure kind of :data:`audee.cases.kinds.Kind.FAILURES`
#: one entry (a test holds the two equal)
EVIDENCE: dict[str, Callable[[Any], list[str]]] = {}


def _evidence(kind: str) -> Callable[[Callable[[Any], list[str]]], Callable[[Any], list[str]]]:
    def register(fn: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
        EVIDENCE[kind] = fn
        return fn
    return register


def _message(text: Any) -> str:
    return " ".join(str(text or "").split())[:400]


def _beyond(d: Any) -> str:
    """How far a detail's values are out of its tolerance (a deviation's, an equivalence's)."""
    tol = d.tolerance
    return (f"largest |difference| {d.max_abs}, largest relative {d.max_rel}, {d.n_out} of {d.n} values beyond "
            f"rtol {tol.rtol if tol else None} / atol {tol.atol if tol else None} ({d.dtype})")


def _g(x: Any) -> str:
    """A score as three digits; a missing one as '-'."""
    return f"{x:.3g}" if isinstance(x, (int, float)) else "-"


@_evidence(Kind.DIVERGENT_ACCEPTANCE)
def _divergent(f: Any) -> list[str]:
    d = f.detail
    return [f"- expected: every backend computes a result, as {', '.join(d.accepted)} do"] + \
        [f"- actual on {b} ({e.phase}): `{_message(e.message)}`" for b, e in d.errors.items()]


@_evidence(Kind.HARD_CRASH)
def _crash(f: Any) -> list[str]:
    d = f.detail
    return [f"- expected: a result or a clean exception; actual on {', '.join(f.backends)}: "
            f"{d.how} at {d.phase}: `{_message(d.message)}`"]


@_evidence(Kind.DEVIATION)
def _deviation(f: Any) -> list[str]:
    d = f.detail
    return [f"- {(d.pair or '').replace('|', ' vs ')}: {_beyond(d)}; expected: within tolerance; first layer "
            f"deviating on its own input: {(d.own_layers or ['-'])[0]}"]


@_evidence(Kind.INCONSISTENCY)
def _inconsistency(f: Any) -> list[str]:
    d = f.detail
    shapes = d.shape_mismatch
    return [f"- {(d.pair or '').replace('|', ' vs ')}: {d.n_flips} predicted labels differ "
            f"(distance {d.distance}" + (f"; output shapes differ: {shapes}" if shapes else "")
            + "); expected: the same labels"]


@_evidence(Kind.TRAIN_DEVIATION)
def _train_deviation(f: Any) -> list[str]:
    d = f.detail
    if d.quantity == "update":
        return [f"- {', '.join(f.backends)}: the {d.setup.get('optimizer')} optimizer's first step is off "
                f"the Keras update rule applied to its own gradient (score {d.score:.3g}, largest "
                f"|difference| {d.max_abs}) on {', '.join(d.weights)}; expected: the rule"]
    return [f"- {(d.pair or '').replace('|', ' vs ')}: the training step's {d.quantity} out of tolerance "
            f"(score {d.score:.3g}; per quantity {d.scores}); losses {d.losses}; gradients out of "
            f"tolerance: {d.gradients or '-'}; layers deviating on their own input: "
            f"{d.own_layers or '-'}{'; the loss alone deviates' if d.loss_own else ''}; setup {d.setup}; "
            f"expected: within tolerance"]


@_evidence(Kind.TRAIN_NAN)
def _train_nan(f: Any) -> list[str]:
    d = f.detail
    return [f"- first non-finite quantity per backend: {d.first}; finite backends: {d.finite_backends}; "
            f"non-finite on some only: {d.differ[:8]}; setup {d.setup}"]


@_evidence(Kind.REGRESSION)
def _regression(f: Any) -> list[str]:
    d = f.detail
    return [f"- {d.newer or (d.pair or '').replace('|', ' vs ')} computes what "
            f"{d.older or 'the other release'} computes differently ({d.component}): seen as "
            f"{', '.join(d.seen)}; largest |difference| {d.max_abs}, score {d.score}, layer {d.layer or '-'}"
            + (f"; error ({d.phase}): `{_message(d.message)}`" if d.message else "")
            + "; expected: the older release's result, unless the release notes announce the change"]


@_evidence(Kind.NAN)
def _nan(f: Any) -> list[str]:
    d = f.detail
    out = [f"- first non-finite layer per backend: {d.first_layer}; finite backends: "
           f"{d.finite_backends}; non-finite counts in the output: {d.counts}"]
    for pair, p in d.patterns.items():
        example = p.layer_example or p.example
        out.append(f"  - {pair.replace('|', ' vs ')}: patterns differ first at {p.first_layer}, "
                   f"example {example.to_json() if example is not None else None}")
    return out


@_evidence(Kind.EQUIVALENCE)
def _equivalence(f: Any) -> list[str]:
    d = f.detail
    if d.reason == "original_rejected":
        return [f"- {d.backend}: refuses the model at {d.phase} (`{_message(d.message)}`) and runs its equivalent by "
                f"the rule {d.rule} (rewritten: {', '.join(d.rewritten) or '-'}); expected: both run, as the "
                f"rewrite moves axes only"]
    if d.reason in ("rejected", "crashed"):
        return [f"- {d.backend}: the model runs, its equivalent by the rule {d.rule} is {d.reason} at {d.phase}: "
                f"`{_message(d.message)}`; expected: both run (the rule's rewrite computes the same function)"]
    what = {"values": _beyond(d),
            "nonfinite": f"non-finite patterns differ: {d.pattern}",
            "shape": f"output shapes differ: {d.shapes}"}.get(d.reason or "", d.reason)
    return [f"- {d.backend}: the model and its equivalent by the rule {d.rule} (rewritten: "
            f"{', '.join(d.rewritten) or '-'}) differ on the {d.tensor}: {what}; first layer apart: "
            f"{d.first_layer or '-'}, the layer that differs alone: {d.layer or '-'}; expected: the same result"]


@_evidence(Kind.DECLARED_OUTPUT)
def _declared_output(f: Any) -> list[str]:
    d = f.detail
    return [f"- {d.layer}: Keras declares {shape_text(d.declared) if d.declared else '-'}; computed "
            + "; ".join(f"{shape_text(got)} on {b}" for b, got in d.computed.items())
            + f" (compared on {', '.join(d.declaring)}); expected: the declared shape and dtype"]


@_evidence(Kind.PRECISION)
def _precision(f: Any) -> list[str]:
    d = f.detail
    return [f"- {d.backend}: error against the {d.reference_dtype} reference (computed by {d.reference}) "
            f"{_g(d.score)} on the {d.tensor} ({d.dtype}; largest |difference| {d.max_abs}), {_g(d.factor)} times "
            f"the most accurate other backend's ({d.best}: {_g(d.best_score)}); first layer out of tolerance: "
            f"{d.first_layer or '-'}; expected: as accurate as the others"]


def expected_actual(root: RootCause, record: Any) -> list[str]:
    """Expected against actual, with the numbers the case's verdict holds (each kind's lines:
    :data:`EVIDENCE`)."""
    if record is None:
        return ["(no case file: see the repro script)"]
    lines = EVIDENCE.get(root.kind)
    findings = [f for f in record.verdict_obj().findings if f.kind == root.kind]
    out = [line for f in findings[:4] for line in lines(f)] if lines else []
    return out or ["(the case's verdict holds no finding of this kind)"]


def _drop_stale(folder: Path, slugs: set[str]) -> None:
    """The reports of an earlier report of this run whose root is no longer a new bug (a known
    entry added since, a script that no longer reproduces): removed, so that bugs/ holds what
    the new-bugs line counts."""
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        if path.stem not in slugs:
            log.info("%s: no longer a new bug's report, removed", path)
            path.unlink()


def write_bug_reports(roots: list[RootCause], out: Path) -> dict[RootKey, Path]:
    """``out/bugs/<slug>.md`` for every new bug (:attr:`RootCause.new_bug`: a script run
    again alone that did not reproduce gets none); returns
    ``{root key: path}`` for the tables to link."""
    written: dict[RootKey, Path] = {}
    new_bugs = [g for g in roots if g.new_bug]
    folder = Path(out) / "bugs"
    _drop_stale(folder, {root_slug(g) for g in new_bugs})
    if not new_bugs:
        return written
    folder.mkdir(parents=True, exist_ok=True)
    for g in new_bugs:
        record = _case(g)
        repro = Path(g.repro).read_text() if g.repro and Path(g.repro).is_file() else None
        lines = [f"# {title(g)}", "",
                 f"- class: **{g.klass}** ({g.class_reason}); kind `{g.kind}`; component "
                 f"{g.component or '-'}; odd backend(s): {', '.join(g.odd) or 'cannot tell'}",
                 f"- backends involved: {', '.join(g.backends)}; {g.cases} test case(s), "
                 f"{g.signatures} signature(s); first case `{g.first_case}`",
                 f"- root cause key: `{g.root}`", "", "## Versions", "", *_versions(record), "",
                 "## Expected and actual", "", *expected_actual(g, record), "", "## Reproduce", ""]
        lines += (["Standalone (no audee needed):", "", "```python", repro.rstrip(), "```"] if repro else
                  ["(no repro script was written for this case: `audee reproduce` its case file)"])
        lines += ["", "## Already reported?", "",
                  "No entry of audee's known-issues list matches it.  Search the tracker first:", "",
                  *[f"    {q}" for q in search_queries(g)], ""]
        path = folder / f"{root_slug(g)}.md"
        write_atomic(path, utf8("\n".join(lines)))
        written[g.root] = path
    return written
