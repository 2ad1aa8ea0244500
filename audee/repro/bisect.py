"""``audee bisect case.pkl``: the first environment, in a list ordered oldest first, whose
release computes a case differently from the oldest.

One backend (``torch``) runs the case in every environment at once, each in its own worker
(``torch@e0``, ``torch@e1``, ...: one pool, :func:`audee.levels.level_of`'s re-run, so a model,
an op call or a training step is judged as it was recorded).  The environments are version
pairs of each other, so the oracles judge every pair and :mod:`audee.oracle.regression` makes
a ``regression`` finding of each pair that differs, whatever oracle saw it; an environment
*differs* when its pair with the oldest has one.  The search is linear, not binary: every
environment runs (the workers start together, so the wall time is about one start-up and one
run), and the answer is the first that differs.  Outputs need not be monotone in the list: when
an environment after the first differing one agrees with the oldest again, the report says so.

Each environment's versions are read from its interpreter's installed distributions
(:func:`audee.repro.recheck.interpreter`, nothing imported), so the answer names the release.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from audee.backends.registry import backend_label, parse_backends, split_label
from audee.cases.case import Kind
from audee.core.errors import AudeeError
from audee.core.exitcodes import ExitCode
from audee.levels import level_of
from audee.settings import TIMEOUT_S
from audee.store.caserecord import CaseRecord


@dataclass
class Step:
    """One environment of the list: its worker's label, interpreter and versions, and whether
    the case's result there differs from the oldest's (with the kinds the difference was seen as)."""

    env: str
    python: str
    label: str
    versions: dict[str, str] = field(default_factory=dict)
    differs: bool = False
    seen: list[str] = field(default_factory=list)
    outcome: str = "ok"

    def to_json(self) -> dict[str, Any]:
        return {"env": self.env, "python": self.python, "label": self.label, "versions": self.versions,
                "differs": self.differs, "seen": self.seen, "outcome": self.outcome}


@dataclass
class Bisection:
    """Every environment's step, oldest first, and the answer read from them."""

    case_id: str
    backend: str
    steps: list[Step]

    @property
    def first(self) -> Step | None:
        """The first environment whose result differs from the oldest's (None: none does)."""
        return next((s for s in self.steps[1:] if s.differs), None)

    @property
    def monotone(self) -> bool:
        """Whether every environment after the first differing one differs too."""
        first = self.first
        return first is None or all(s.differs for s in self.steps[self.steps.index(first):])

    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.first is not None else ExitCode.NO_CHANGE

    def changed(self) -> list[str]:
        """The packages whose versions are not the same in every environment."""
        keys = dict.fromkeys(k for s in self.steps for k in s.versions)
        return [k for k in keys if len({s.versions.get(k) for s in self.steps}) > 1]

    def to_json(self) -> dict[str, Any]:
        first = self.first
        return {"case": self.case_id, "backend": self.backend, "search": "linear",
                "first": first.env if first else None, "monotone": self.monotone,
                "steps": [s.to_json() for s in self.steps]}

    def text(self) -> str:
        keys = self.changed() or [k for k in ("keras", self.backend) if any(k in s.versions for s in self.steps)]
        oldest = self.steps[0]
        lines = [f"case {self.case_id} on {self.backend} in {len(self.steps)} environments, oldest first "
                 "(linear: each run once, judged against the oldest)"]
        for s in self.steps:
            what = "the reference" if s is oldest else (f"DIFFERS ({', '.join(s.seen)})" if s.differs else "same")
            vers = ", ".join(f"{k} {s.versions.get(k, '?')}" for k in keys)
            lines.append(f"  {s.env:<12} {vers:<40} {s.outcome:<10} {what}")
        first = self.first
        if first is None:
            lines.append(f"no environment computes the case differently from {oldest.env}")
        else:
            vers = ", ".join(f"{k} {first.versions.get(k, '?')}" for k in keys)
            lines.append(f"first environment that differs from {oldest.env}: {first.env} ({vers})")
            if not self.monotone:
                back = [s.env for s in self.steps[self.steps.index(first):] if not s.differs]
                lines.append(f"  not monotone: {', '.join(back)} computes it as {oldest.env} again")
        return "\n".join(lines)


def bisect(path: str | Path, envs: Mapping[str, str], *, backend: str | None = None, log_dir: Path,
           timeout: float = TIMEOUT_S) -> Bisection:
    """Run the case in ``path`` on ``backend`` in each of ``envs`` (name -> interpreter, oldest
    first; at least two) and judge each against the oldest (module docstring).  ``backend``:
    default, the one backend the case ran on (in any environment)."""
    from audee.repro.recheck import interpreter

    if len(envs) < 2:
        raise AudeeError(f"bisect needs at least two environments, oldest first; got {len(envs)}", field="--env")
    record = CaseRecord.from_file(path)
    name, device = _backend(record, backend, path)
    spec = ",".join(backend_label(name, device, env=e) for e in envs)
    refs = parse_backends(spec, envs=dict(envs))
    labels = [r.label for r in refs]
    result = level_of(record).rerun(record, refs=refs, log_dir=log_dir, timeout=timeout, tie_margin=None)
    steps = []
    for (env, python), label in zip(envs.items(), labels):
        found = [f for f in result.verdict.findings
                 if f.kind == Kind.REGRESSION and sorted(f.backends) == sorted([labels[0], label])]
        outcome = result.outcomes.get(label)
        failure = getattr(outcome, "failure", None)
        steps.append(Step(env, python, label, interpreter(python)[1], differs=bool(found) and label != labels[0],
                          seen=list(found[0].detail.seen) if found else [],
                          outcome="ok" if failure is None else f"{failure.kind}:{failure.phase}"))
    return Bisection(record.id, backend_label(name, device), steps)


def _backend(record: CaseRecord, backend: str | None, path: str | Path) -> tuple[str, str]:
    """(name, device) of the backend to bisect: ``backend`` (no environment in it), else the
    one backend the case ran on."""
    if backend is not None:
        name, env, device = split_label(backend)
        if env is not None:
            raise AudeeError(f"{backend!r} names an environment: give the backend alone (torch); the environments "
                             "are --env's", field="--backend")
        return name, device or "cpu"
    ran = {(n, d or "cpu") for n, _, d in (split_label(b.label) for b in record.backends)}
    if len(ran) != 1:
        names = ", ".join(sorted(backend_label(n, d) for n, d in ran))
        raise AudeeError(f"the case ran on {names}: name the one to bisect with --backend", source=str(path))
    return next(iter(ran))
