"""A converter's explicit refusals, remembered for the rest of a run (``--refusal-memo``).

The TFLite converter, OpenVINO's ONNX frontend, torch.onnx or a compiled mode refuse some
layer API under some dtype policy with an explicit "unsupported" error (``tf.AvgPool`` in
bfloat16 is "neither a custom op nor a flex op"), and they refuse it again on every case of
that API and policy: an API-level run spent 1.4-2.7 s converting each such case only to
record the same limitation.  Once a backend refused a (API, dtype policy), the later
API-level cases of that key leave it out at build time, so it neither builds nor converts
them; each such case's row says so (``skipped``: the refusal's words and the case that saw
them), as the training phase records a backend that does not train: the backend has no
outcome on the case, never a made-up one, and no row drops it silently.  The case that saw
the refusal says so too (``refused``), and a resumed run rebuilds the memo from these rows.

What qualifies (:func:`refusal_of`): a clean error (a crash, a timeout, a worker's death is
retried every time), worded as an explicit refusal (the ``limitation`` class's words,
:func:`audee.triage.rootcause.explicit_refusal`), of a backend that compiles or converts
another (:func:`audee.backends.info.reference_of`: the refusal is its own only when its
source program ran; an independent framework's refusals follow parameters, such as a CPU
kernel's data format, not the API alone), on a case whose draws are all valid (a crafty
invalid value is refused for its value).  A case is never left without a backend: the memo
skips none when it would skip them all.

Scope: one fuzz run (a campaign unit is one).  A unit's rows then depend on its own cases
only, whichever shard, slot or order ran it, the case a skip names is in the same
``results.jsonl``, and a resume rebuilds the memo from that one table; a shipped campaign
gives each API to one unit per backend set, so a memo across a shard's units would find no
more to skip.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from audee.backends.info import reference_of
from audee.cases.case import Outcome
from audee.cases.spec import ModelSpec
from audee.triage.rootcause import UNSUPPORTED, explicit_refusal

#: characters of a refusal's words a row keeps (the row's ``errors`` keep as many)
REASON_CHARS = 300

#: a case's memo key: the API its layer under test is and that layer's dtype policy
Key = tuple[str, str]


@dataclass(frozen=True)
class Refusal:
    """A backend's explicit refusal of one key, and the case that saw it."""

    case: str     # the case id
    reason: str   # "<phase>: <the refusal's words>", one line

    def to_json(self) -> dict[str, str]:
        """A row's ``skipped`` entry."""
        return {"reason": self.reason, "case": self.case}


def case_key(spec: ModelSpec) -> Key | None:
    """The (API, dtype policy) of an API-level case: its layer under test is the model's
    output (:mod:`audee.mutation.apilevel`, before its spec is named and given its meta, as
    the redraw test builds it); None for a spec without that layer."""
    try:
        layer = spec.layer(spec.output)
    except KeyError:
        return None
    return layer.api, str(layer.params.get("dtype", "float32"))


def reason_of(phase: str, message: str) -> str:
    """One line naming the refusal: its phase and the words around the explicit "unsupported"
    (a converter's message may carry a long preamble before them)."""
    text = " ".join(message.split())
    m = UNSUPPORTED.search(text)
    start = 0 if m is None or m.end() <= REASON_CHARS else max(0, m.start() - REASON_CHARS // 2)
    cut = text[start:start + REASON_CHARS]
    return f"{phase}: {'...' if start else ''}{cut}{'...' if start + REASON_CHARS < len(text) else ''}"


def refusal_of(label: str, outcomes: Mapping[str, Outcome]) -> str | None:
    """The reason line when ``label``'s outcome is an explicit refusal the memo keeps (module
    docstring), else None."""
    f = outcomes[label].failure
    if f is None or f.hard or not explicit_refusal(f.message):
        return None
    source = reference_of(label)
    if source is None:
        return None
    ran = outcomes.get(source)
    if ran is not None and not ran.ok:
        return None  # the program it converts failed too: not the converter's own refusal
    return reason_of(f.phase, f.message)


def _valid(spec: ModelSpec) -> bool:
    """Whether every draw of the case is valid (no crafty invalid value in its mutation record)."""
    return not any(isinstance(m, dict) and m.get("invalid") for m in spec.meta.get("mutations") or [])


class RefusalMemo:
    """The refusals seen in one run, per (backend, key)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, Key], Refusal] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def skips(self, spec: ModelSpec, labels: Iterable[str]) -> dict[str, Refusal]:
        """The backends among ``labels`` that refused ``spec``'s key before, with their refusal;
        none when that would be every one of them (a case runs somewhere)."""
        key = case_key(spec)
        labels = list(labels)
        if key is None:
            return {}
        out = {label: self._seen[(label, key)] for label in labels if (label, key) in self._seen}
        return {} if len(out) == len(labels) else out

    def open_for(self, spec: ModelSpec, labels: Iterable[str]) -> bool:
        """Whether a case of ``spec`` could still teach the memo: one of ``labels`` converts or
        compiles another and has not refused the key yet (else waiting for the case is useless)."""
        key = case_key(spec)
        return key is not None and any(reference_of(label) is not None and (label, key) not in self._seen
                                       for label in labels)

    def learn(self, case_id: str, spec: ModelSpec, outcomes: Mapping[str, Outcome]) -> dict[str, str]:
        """Remember the refusals of a case's ``outcomes``; the new ones (backend -> reason),
        which its row records as ``refused``."""
        key = case_key(spec)
        if key is None or not _valid(spec):
            return {}
        new = {}
        for label in outcomes:
            if (label, key) in self._seen:
                continue
            why = refusal_of(label, outcomes)
            if why is not None:
                self._seen[(label, key)] = Refusal(case_id, why)
                new[label] = why
        return new

    def restore(self, rows: Iterable[Any]) -> None:
        """The memo of a run resumed from its rows (:class:`audee.records.rows.ResultRow`): each
        refusal a row recorded (``refused``) or skipped for (``skipped``), under the row's API
        and dtype policy, the first one of each key kept."""
        for r in rows:
            if r.api is None or r.dtype is None:
                continue
            key = (str(r.api), str(r.dtype))
            for label, why in r.refused.items():
                self._seen.setdefault((label, key), Refusal(r.id, why))
            for label, skip in r.skipped.items():
                self._seen.setdefault((label, key), Refusal(str(skip.get("case", "")), str(skip.get("reason", ""))))

