"""A converter's explicit refusals, remembered for the rest of a run (``--refusal-memo``).

A converter (the TFLite converter, an ONNX frontend, an exporter) or a compiled mode refuse some
layer API under some dtype policy with an explicit "unsupported" error (``tf.AvgPool3D`` is
"neither a custom op nor a flex op" in any dtype, ``tf.MatMul`` in float16), and refuse it
again on every case of that API and policy: an API-level run spent 1.4-2.7 s converting each
such case only to record the same limitation.  Once a backend refused an (API, dtype policy)
:data:`STRIKES` times without converting any case of it, the run's later cases of that key
leave it out at build time, so its worker neither builds nor converts them; each such case's
row says so (``skipped``: the refusal's words and the cases that saw it), as the training
phase records a backend that does not train: the backend has no outcome on the case, never
a made-up one, and no row drops it silently.  Each case that saw a refusal says so too
(``refused``), and a resumed run rebuilds the memo from these rows and the rows' statuses.

Why two refusals and none converted: one refusal may come from a parameter value, not from
the API and policy (one ONNX runtime refuses a grouped channels-first Conv2D that tf2onnx leaves a
``PartitionedCall`` in, and a Dense with a gelu activation for tf2onnx's ``Erfc``; with one
refusal the memo skipped a runtime's float32 Conv2D and Dense cases, most of which convert:
``experiments/results/refusal_budget.md``).  A second refusal on another draw of the key,
with no conversion of it, is the API and policy's; a key the backend converted (its case ran,
or failed only after converting) is never skipped.

What counts as a refusal (:func:`refusals_in`): a backend's clean error (a crash, a timeout,
a worker's death is retried every time) that the case's signatures put in the ``limitation``
class (:func:`audee.triage.rootcause.classify`, the one owner of the classes: an explicit
"unsupported" on a valid draw, nothing undefined about it, and no known issue calling it a
bug: PyTorch's exporter writing bfloat16 nodes its opset does not allow fails with
"unsupported type" but is a known bug of an exporter's opset, retried), of a backend
that converts or compiles another (:func:`watched`) whose source program ran the case (else
the refusal is not the converter's own).  A Keras framework's own refusals follow parameters,
such as a CPU kernel's data format, not the API alone: never skipped.  A case is never left
without a backend: the memo skips none when it would skip them all.

When: a case's skips read the cases at least :data:`LAG` before it in the run's order (the
fuzz loop makes a case while the one before it is still running: ``audee.fuzz._run_pipelined``),
so they depend on the run's earlier cases alone, never on timing or on the pipeline waiting,
and a resumed run, its memo rebuilt from the rows in their order, skips what the run would
have skipped had it never stopped.

Scope: one fuzz run (a campaign unit is one).  A unit's rows then depend on its own cases
only, whichever shard, slot or order ran it, the cases a skip names are in the same
``results.jsonl``, and a resume rebuilds the memo from that one table; a shipped campaign
gives each API to one unit per backend set, so a memo across a shard's units would find no
more to skip.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from audee.backends.info import keras_frameworks, reference_of
from audee.cases.case import Kind, Outcome, TestCase, Verdict
from audee.cases.spec import ModelSpec
from audee.triage.known import load_known_issues, match_known
from audee.triage.rootcause import classify
from audee.triage.signature import UNSUPPORTED, case_signatures

#: characters of a refusal's words a row keeps (the row's ``errors`` keep as many)
REASON_CHARS = 300
#: refusals of a key, with no conversion of it, before a backend skips the key's later cases
STRIKES = 2
#: how many cases before it a case's skips read from: the one just before is still running
#: when a case is made (the fuzz loop keeps one case in flight)
LAG = 2

#: a case's memo key: the API its layer under test is and that layer's dtype policy
Key = tuple[str, str]


@dataclass(frozen=True)
class Refusal:
    """Why a backend is skipped: the cases whose refusals of the key decided it, and the words
    of the first."""

    cases: tuple[str, ...]   # case ids, in the run's order
    reason: str              # "<phase>: <the refusal's words>", one line

    def to_json(self) -> dict[str, Any]:
        """A row's ``skipped`` entry."""
        return {"reason": self.reason, "cases": list(self.cases)}


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


def refusals_in(case: TestCase, verdict: Verdict, outcomes: Mapping[str, Outcome],
                issues: list[Any]) -> dict[str, str]:
    """The case's refusals the memo keeps (module docstring), backend -> reason line: each
    backend it watches (:func:`watched`) that a ``limitation``-class signature of the verdict
    names (:func:`audee.triage.rootcause.classify`, a known issue of ``issues`` deciding first:
    an explicit "unsupported" on a valid draw, nothing undefined about it), whose own failure
    is a clean error, and whose source program ran the case."""
    out: dict[str, str] = {}
    meta = {**case.spec.meta, **case.meta}  # the mutation record (invalid draws) and the API, as rows carry them
    for sig in case_signatures(verdict, case.spec, meta):
        if sig.kind != Kind.DIVERGENT_ACCEPTANCE or classify(sig, match_known(sig, issues))[0] != "limitation":
            continue
        for label in sig.backends:
            o = outcomes.get(label)
            if label in out or o is None or o.failure is None or o.failure.hard or not watched(label):
                continue
            source = reference_of(label)
            ran = outcomes.get(source) if source is not None else None
            if ran is not None and not ran.ok:
                continue  # the program it converts failed too: not the converter's own refusal
            out[label] = reason_of(o.failure.phase, o.failure.message)
    return out


def watched(label: str) -> bool:
    """Whether the memo may skip backend ``label``: one that converts or compiles another's
    program (a converter, a compiled or other mode, a plugin declaring its reference), not a
    Keras framework as it is (``jax``, judged against ``jax-eager``, is one of the three)."""
    return reference_of(label) is not None and label.partition("@")[0] not in keras_frameworks()


def converted(status: str) -> bool:
    """Whether a backend's status on a case, as its row writes it (``ok``, ``<kind>:<phase>``),
    shows it converted the case: it ran, or failed only after converting (loading its weights,
    running)."""
    return status == "ok" or status.rpartition(":")[2] in ("weights", "run")


def status_of(outcome: Outcome) -> str:
    """``outcome`` as a row's ``backends`` writes it (:func:`audee.fuzz.result_row`)."""
    return "ok" if outcome.ok else f"{outcome.failure.kind}:{outcome.failure.phase}"


@dataclass
class _Seen:
    """One backend's cases of one key: its refusals (ordinal, case id, reason) and the first
    case it converted (its ordinal), in the run's order."""

    refusals: list[tuple[int, str, str]] = field(default_factory=list)
    converted: int | None = None


class RefusalMemo:
    """The refusals and conversions of one run, per (backend, key), by the cases' ordinals in
    the run's order (:attr:`made`: the next case's)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, Key], _Seen] = {}
        self._issues: list[Any] | None = None  # the shipped known issues: a known one's class decides
        self.made = 0

    def skips(self, spec: ModelSpec, labels: Iterable[str]) -> dict[str, Refusal]:
        """The backends among ``labels`` the next case, of ``spec``, leaves out: each refused its
        key :data:`STRIKES` times, and converted it never, in the cases :data:`LAG` or more
        before it; none when that would be every one of them (a case runs somewhere)."""
        key = case_key(spec)
        labels = list(labels)
        if key is None:
            return {}
        known = self.made - LAG
        out = {}
        for label in labels:
            seen = self._seen.get((label, key))
            if seen is None or (seen.converted is not None and seen.converted <= known):
                continue
            refusals = [r for r in seen.refusals if r[0] <= known]
            if len(refusals) >= STRIKES:
                out[label] = Refusal(tuple(case for _, case, _ in refusals[:STRIKES]), refusals[0][2])
        return {} if len(out) == len(labels) else out

    def submitted(self) -> int:
        """The ordinal of the case being submitted (the next one's is one more)."""
        self.made += 1
        return self.made - 1

    def learn(self, ordinal: int, case: TestCase, verdict: Verdict, outcomes: Mapping[str, Outcome]) -> dict[str, str]:
        """Remember what the backends it watches did with case ``ordinal``, judged: its
        refusals (backend -> reason, returned: its row's ``refused``) and its conversions."""
        key = case_key(case.spec)
        if key is None:
            return {}
        if self._issues is None:
            self._issues = load_known_issues()
        new = refusals_in(case, verdict, outcomes, self._issues)
        for label, outcome in outcomes.items():
            self._note(label, key, ordinal, case.id, status_of(outcome), new.get(label))
        return new

    def restore(self, rows: Iterable[Any]) -> None:
        """The memo of a run resumed from its rows (:class:`audee.records.rows.ResultRow`, in the
        order written): each row's refusals (``refused``) and conversions (``backends``) under
        the row's API and dtype policy; the next case's ordinal is the number of rows."""
        n = 0
        for n, r in enumerate(rows, 1):
            if r.api is None or r.dtype is None:
                continue
            key = (str(r.api), str(r.dtype))
            for label, status in r.backends.items():
                self._note(label, key, n - 1, r.id, status, r.refused.get(label))
        self.made = n

    def _note(self, label: str, key: Key, ordinal: int, case_id: str, status: str, why: str | None) -> None:
        if not watched(label):
            return  # a Keras framework as it is: never skipped
        seen = self._seen.setdefault((label, key), _Seen())
        if why is not None:
            seen.refusals.append((ordinal, case_id, why))
        elif converted(status) and seen.converted is None:
            seen.converted = ordinal
