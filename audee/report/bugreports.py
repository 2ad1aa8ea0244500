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
from typing import Any

from audee.backends.info import all_query_noise, all_version_keys, first_blamed, trackers_of
from audee.backends.registry import env_of
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


def expected_actual(root: RootCause, record: Any) -> list[str]:
    """Expected against actual, with the numbers the case's verdict holds."""
    if record is None:
        return ["(no case file: see the repro script)"]
    findings = [f for f in record.verdict_obj().findings if f.kind == root.kind]
    out: list[str] = []
    for f in findings[:4]:
        d = f.detail  # the kind's detail type (audee.records.findings)
        if root.kind == "divergent_acceptance":
            out.append(f"- expected: every backend computes a result, as {', '.join(d.accepted)} do")
            for b, e in d.errors.items():
                msg = " ".join(str(e.message or "").split())[:400]
                out.append(f"- actual on {b} ({e.phase}): `{msg}`")
        elif root.kind == "hard_crash":
            out.append(f"- expected: a result or a clean exception; actual on {', '.join(f.backends)}: "
                       f"{d.how} at {d.phase}: `{' '.join(str(d.message or '').split())[:400]}`")
        elif root.kind == "deviation":
            tol = d.tolerance
            out.append(f"- {(d.pair or '').replace('|', ' vs ')}: largest |difference| {d.max_abs}, "
                       f"largest relative {d.max_rel}, {d.n_out} of {d.n} values beyond "
                       f"rtol {tol.rtol if tol else None} / atol {tol.atol if tol else None} "
                       f"({d.dtype}); expected: within tolerance; first layer deviating on its own input: "
                       f"{(d.own_layers or ['-'])[0]}")
        elif root.kind == "inconsistency":
            shapes = d.shape_mismatch
            out.append(f"- {(d.pair or '').replace('|', ' vs ')}: {d.n_flips} predicted labels differ "
                       f"(distance {d.distance}"
                       + (f"; output shapes differ: {shapes}" if shapes else "") + "); expected: the same labels")
        elif root.kind == "train_deviation" and d.quantity == "update":
            out.append(f"- {', '.join(f.backends)}: the {d.setup.get('optimizer')} optimizer's first step is off "
                       f"the Keras update rule applied to its own gradient (score {d.score:.3g}, largest "
                       f"|difference| {d.max_abs}) on {', '.join(d.weights)}; expected: the rule")
        elif root.kind == "train_deviation":
            out.append(f"- {(d.pair or '').replace('|', ' vs ')}: the training step's {d.quantity} out of tolerance "
                       f"(score {d.score:.3g}; per quantity {d.scores}); losses {d.losses}; gradients out of "
                       f"tolerance: {d.gradients or '-'}; layers deviating on their own input: "
                       f"{d.own_layers or '-'}{'; the loss alone deviates' if d.loss_own else ''}; setup {d.setup}; "
                       f"expected: within tolerance")
        elif root.kind == "train_nan":
            out.append(f"- first non-finite quantity per backend: {d.first}; finite backends: {d.finite_backends}; "
                       f"non-finite on some only: {d.differ[:8]}; setup {d.setup}")
        elif root.kind == "regression":
            out.append(f"- {d.newer or (d.pair or '').replace('|', ' vs ')} computes what "
                       f"{d.older or 'the other release'} computes differently ({d.component}): seen as "
                       f"{', '.join(d.seen)}; largest |difference| {d.max_abs}, score {d.score}, layer {d.layer or '-'}"
                       + (f"; error ({d.phase}): `{' '.join(str(d.message).split())[:400]}`" if d.message else "")
                       + "; expected: the older release's result, unless the release notes announce the change")
        elif root.kind == "nan":
            out.append(f"- first non-finite layer per backend: {d.first_layer}; finite backends: "
                       f"{d.finite_backends}; non-finite counts in the output: {d.counts}")
            for pair, p in d.patterns.items():
                example = p.layer_example or p.example
                out.append(f"  - {pair.replace('|', ' vs ')}: patterns differ first at {p.first_layer}, "
                           f"example {example.to_json() if example is not None else None}")
    return out or ["(the case's verdict holds no finding of this kind)"]


def write_bug_reports(roots: list[RootCause], out: Path) -> dict[RootKey, Path]:
    """``out/bugs/<slug>.md`` for every new bug (:attr:`RootCause.new_bug`: a script run
    again alone that did not reproduce gets none); returns
    ``{root key: path}`` for the tables to link."""
    written: dict[RootKey, Path] = {}
    new_bugs = [g for g in roots if g.new_bug]
    if not new_bugs:
        return written
    folder = Path(out) / "bugs"
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
