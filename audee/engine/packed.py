"""Running test cases in packs: K cases per build, each judged as if run alone.

An API-level case is a one-layer model; if most of a build's cost were fixed (the Keras
model, one XLA compile, one tf2onnx export) K cases in one model would share it.  Here
cases go through the workers K at a time as one model (:mod:`audee.cases.pack`) and come back
as one :class:`Result` each, the result running the case alone gives (timings apart):

1. **Making the cases.**  A case's redraw test and its weights need its builds
   (``levels.base.unbuildable``, ``Executor.complete_weights``).  The cases are made once with a
   :class:`Planner` standing in for the executor that calls every unknown spec buildable;
   those specs are then built as packs, and the cases made again with the planner now
   answering from those builds, until no spec is unknown (a valid draw no backend builds
   is redrawn exactly as it would be alone).  Cases of one batch size, dtype policy and
   invalid flag go together (a bfloat16 model is refused whole by onnxruntime; a crafty
   invalid value is mostly rejected): failures cluster, packs stay clean.  A case with
   nothing to pack it with (alone in its group, or its group's cases fail half the time:
   crafty invalid values from the start) is made by the executor itself and run alone,
   as ``fuzz._run_pipelined`` runs it.
2. **Bisection.**  A pack that a backend cannot build or run (clean error, crash,
   timeout) is split on that backend, round by round, down to the failing cases: an
   error naming a packed node (:func:`audee.cases.pack.members_named`) takes its case out;
   otherwise halves; a crash or a timeout (a restart or a full timeout per level), or
   both halves of a run's split failing, one by one.  A failing case ends as its own
   spec (a pack of one is the case itself), so what it gets there is exactly what it
   gets alone, and the others keep their packed results.
3. **Judging.**  Each case's outcomes are picked out of its packs' replies and judged by
   the executor's own oracles (:meth:`Executor.judge`).  A case that fails (or whose
   non-finite values need diagnosis) with any outcome from a pack is run alone before it
   is recorded; the alone result is recorded, and when the failure did not hold alone
   its provenance says so (``pack_only``).  A case whose every outcome came from its own
   spec is judged and diagnosed as it is.

Rows come out in the order the cases were asked for, a window of ``2 * size`` cases at a
time; a case's ``seconds`` is its share of its window's wall time, its ``phases`` its
share of its packs' worker time plus its own (alone runs, diagnosis).

Measured (``experiments/bench_pack.py``, experiments/results/bench_pack.md): on this CPU
stack a one-layer model's XLA compile and tf2onnx export cost about as much per layer
inside a pack as alone (a clean pack of 32 halves the worker time at best), while a
third of API-level cases fail somewhere, and every failure re-converts or re-compiles a
part of its pack and is confirmed alone: packs ran slower than single cases, so
``FuzzSettings.pack`` defaults to 1.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from audee.backends.pool import WorkerFailure
from audee.cases.case import Kind, Outcome, TestCase
from audee.engine.execute import Executor, PhaseTally, Result, complete_weights, first_shapes
from audee.oracle.deviation import FULL
from audee.cases.pack import Pack, batch_of, members_named, pack, pack_specs
from audee.cases.spec import ModelSpec, weights_key
from audee.cases.weights import Shapes

log = logging.getLogger(__name__)

Item = Any                                   # what the case maker turns into one case (API-level: (api, index))
Made = tuple[TestCase, dict[str, Any]]       # a case and its row's provenance
# makes the items' cases, asking the planner (or, for cases run alone, the executor itself)
# for builds and weights, as fuzz._api_cases asks its executor
MakeCases = Callable[["Planner | Executor", list[Item]], Iterable[Made]]

WINDOW = 2          # cases made ahead, in packs' worth: groups of a dtype policy fill up across them
DENSE = 0.5         # a group whose cases end isolated this often runs unpacked
PROBE = 4           # cases of a group seen before its isolation rate is believed
MAX_PASSES = 12     # making a window's cases again for redraws (a case redraws at most max_redraws times)


class Planner:
    """Stands in for the :class:`Executor` while cases are made: the redraw test's builds
    (``build``) and ``complete_weights`` are answered from pack builds; a spec not built
    yet is called buildable (and gets no weights) until it is."""

    def __init__(self, labels: list[str]):
        self.labels = labels
        self.known: dict[str, dict[str, Any]] = {}   # spec key -> backend -> weight shapes | WorkerFailure

    def build(self, spec: ModelSpec) -> dict[str, Any]:
        return self.known.get(spec.key()) or {label: {} for label in self.labels}

    def shapes(self, spec: ModelSpec) -> Shapes | None:
        """As :meth:`Executor.shapes`: the first backend's that builds ``spec``."""
        return first_shapes(self.known.get(spec.key(), {}))

    def complete_weights(self, case: TestCase, weight_seed: int) -> None:
        complete_weights(case, self.shapes(case.spec), weight_seed)


@dataclass
class _Job:
    """Members (indexes into a group) to build or run together on some backends."""

    labels: list[str]
    members: list[int]
    parent: int | None = None    # the split it came from: its sibling shares it
    guided: bool = False         # what an error naming some members left: halved if it fails too


@dataclass
class _Group:
    """Cases made together and packed together, and what their packs gave on each backend."""

    items: list[Item]
    key: tuple
    made: list[Made] = field(default_factory=list)
    # backend -> the members built together there, with the spec keys they were built with
    parts: dict[str, list[tuple[list[int], tuple[str, ...]]]] = field(default_factory=dict)
    replies: dict[int, dict[str, Any]] = field(default_factory=dict)  # member -> backend -> reply | failure
    packed: dict[int, set[str]] = field(default_factory=dict)   # member -> backends whose reply came from a pack
    tally: PhaseTally = field(default_factory=PhaseTally)       # the packs' worker time, shared out

    @property
    def cases(self) -> list[TestCase]:
        return [c for c, _ in self.made]


class PackRunner:
    """Cases in packs of ``size`` on an executor's pool (see the module docstring)."""

    def __init__(self, ex: Executor, size: int):
        if size < 1:
            raise ValueError(f"pack size must be at least 1, got {size}")
        self.ex = ex
        self.size = size
        self.seen: dict[tuple, list[int]] = {}   # group key -> [cases, cases isolated somewhere]
        self._splits = 0
        # cases, those with an outcome from a pack; what the packs cost: requests sent (builds
        # and runs, one per backend), packs split (guided by an error, in halves, one by one),
        # cases run alone to confirm a failure, pack-only findings
        self.counts = {"cases": 0, "packed": 0, "builds": 0, "runs": 0, "guided": 0, "halved": 0,
                       "one_by_one": 0, "confirmed": 0, "pack_only": 0}
        self.seconds: dict[str, float] = {}   # the parent's wall time per stage (make, build, run, ...)

    @property
    def labels(self) -> list[str]:
        return self.ex.pool.labels

    # ---- the run -----------------------------------------------------------------------------
    def run(self, items: Sequence[Item], make: MakeCases) -> Iterator[tuple[Result, dict[str, Any]]]:
        """Each item's result and provenance, in ``items``' order."""
        span = max(1, WINDOW * self.size)
        last = time.perf_counter()
        for start in range(0, len(items), span):
            window = list(items[start:start + span])
            results = self._window(window, make)
            now = time.perf_counter()
            for result, _ in results:
                result.seconds = (now - last) / len(results)  # the rows add up to the run's wall time
            last = now
            yield from results
        log.info("packs of %d: %s; seconds %s", self.size, ", ".join(f"{k} {v}" for k, v in self.counts.items()),
                 ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()))

    @contextmanager
    def _timed(self, what: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[what] = self.seconds.get(what, 0.0) + time.perf_counter() - t

    def _window(self, window: list[Item], make: MakeCases) -> list[tuple[Result, dict[str, Any]]]:
        planner = Planner(self.labels)
        with self._timed("make"):
            drafts = list(make(planner, window))
        out: dict[int, tuple[Result, dict[str, Any]]] = {}
        singles: list[int] = []
        confirm: list[tuple[int, _Pending]] = []
        for indexes, key in self._grouped(drafts):
            if len(indexes) == 1:  # nothing to pack it with: made and run exactly as alone, below
                singles.append(indexes[0])
                continue
            group = _Group([window[i] for i in indexes], key)
            for i, got in zip(indexes, self._group(group, planner, make)):
                if isinstance(got, _Pending):
                    confirm.append((i, got))
                else:
                    out[i] = got
        # one step apart, as fuzz._run_pipelined runs them: cases with nothing to pack them
        # with, made by the executor itself (the unpacked path), then the confirmations
        with self._timed("alone"):
            ran = self._pipelined(make(self.ex, [window[i] for i in singles]))
        for i, got in zip(singles, ran):
            out[i] = got
            self._seen(_key(*drafts[i]), [any(not o.ok for o in got[0].outcomes.values())])
        with self._timed("confirm"):
            confirmed = self._pipelined((p.case, p.extra) for _, p in confirm)
        for (i, pending), (alone, _) in zip(confirm, confirmed):
            out[i] = self._confirmed(pending, alone)
        return [out[i] for i in range(len(window))]

    def _pipelined(self, made: Iterable[Made]) -> list[tuple[Result, dict[str, Any]]]:
        """Cases run alone, one step apart: case k+1 is made and sent while case k computes."""
        out: list[tuple[Result, dict[str, Any]]] = []
        waiting: tuple[Any, dict[str, Any]] | None = None
        for case, extra in made:
            sub = self.ex.submit(case)
            if waiting is not None:
                out.append((self.ex.finish(waiting[0]), waiting[1]))
            waiting = (sub, extra)
        if waiting is not None:
            out.append((self.ex.finish(waiting[0]), waiting[1]))
        return out

    def _grouped(self, drafts: list[Made]) -> list[tuple[list[int], tuple]]:
        """Indexes of the cases to pack together: one batch size, dtype policy and invalid
        flag, at most the size this group's isolation rate allows."""
        buckets: dict[tuple, list[int]] = {}
        for i, (case, extra) in enumerate(drafts):
            buckets.setdefault(_key(case, extra), []).append(i)
        out = []
        for key, indexes in buckets.items():
            n = self._size_for(key)
            out += [(indexes[k:k + n], key) for k in range(0, len(indexes), n)]
        return out

    def _seen(self, key: tuple, isolated: list[bool]) -> None:
        """Count cases of a group key and how many left their packs (failed somewhere)."""
        stats = self.seen.setdefault(key, [0, 0])
        stats[0] += len(isolated)
        stats[1] += sum(isolated)
        self.counts["cases"] += len(isolated)

    def _size_for(self, key: tuple) -> int:
        cases, isolated = self.seen.get(key, [0, 0])
        if cases >= PROBE:
            return 1 if isolated >= DENSE * cases else self.size
        # before that, cases with a crafty invalid value go alone: it is drawn to be
        # rejected, and was (some backend failed) in 41 of 43 api-cpu campaign cases
        return 1 if key[2] else self.size

    def _group(self, group: _Group, planner: Planner,
               make: MakeCases) -> list["tuple[Result, dict[str, Any]] | _Pending"]:
        for _ in range(MAX_PASSES):
            with self._timed("make"):
                group.made = list(make(planner, group.items))
            new = [i for i, (c, _) in enumerate(group.made) if c.spec.key() not in planner.known]
            if not new:
                break
            with self._timed("build"):
                self._build(group, new, planner)
        else:
            raise RuntimeError(f"cases {group.items} still redrawn after {MAX_PASSES} passes")
        with self._timed("run"):
            self._run(group, planner)
        with self._timed("judge"):
            results = [self._judge(group, i) for i in range(len(group.made))]
        log.debug("pack group %s of %d: parts %s", group.key, len(group.made),
                  {label: [len(m) for m, _ in parts] for label, parts in group.parts.items()})
        self._seen(group.key, [self._isolated(group, i) for i in range(len(results))])
        return results

    # ---- builds: the redraw test and the weights' shapes ------------------------------------
    def _build(self, group: _Group, members: list[int], planner: Planner) -> None:
        """Build ``members``' specs as packs on every backend, bisecting where a pack fails;
        ``planner.known`` learns each spec's shapes or failure on every backend."""
        specs = {i: group.made[i][0].spec for i in members}
        for i in members:
            planner.known.setdefault(specs[i].key(), {})

        def send(job: _Job) -> dict[str, Any]:
            packed = pack_specs([specs[i] for i in job.members])
            got = self.ex.pool.build(packed.spec, labels=job.labels)
            self.counts["builds"] += len(job.labels)
            for label, reply in got.items():
                if not isinstance(reply, WorkerFailure):
                    group.tally.add(label, reply.get("phases", {}))
                    group.parts.setdefault(label, []).append(
                        (list(job.members), tuple(specs[i].key() for i in job.members)))
                    for i, shapes in zip(job.members, packed.member_shapes(reply["shapes"])):
                        planner.known[specs[i].key()][label] = shapes
            return got

        def alone(label: str, i: int, failure: WorkerFailure) -> None:
            planner.known[specs[i].key()][label] = failure

        # a pack that fails to build fails fast (Keras refusing a layer, before any export or
        # compile), so halves are cheap to try: no one-by-one for dense build failures
        self._bisect([_Job(list(self.labels), list(members))], send, alone, submit_all=False, dense=False)
        for i in members:  # the backends' order, as Executor.build gives it
            got = planner.known[specs[i].key()]
            planner.known[specs[i].key()] = {label: got[label] for label in self.labels if label in got}

    # ---- runs ----------------------------------------------------------------------------------
    def _run(self, group: _Group, planner: Planner) -> None:
        """Run every member on every backend that built it, in the packs it was built in
        (bisecting a pack whose run fails); a member a backend could not build keeps that
        failure as its outcome there."""
        cases = group.cases
        for i, case in enumerate(cases):
            group.replies[i] = {}
            group.packed[i] = set()
            for label, got in planner.known[case.spec.key()].items():
                if isinstance(got, WorkerFailure):
                    group.replies[i][label] = got
        jobs: dict[tuple[int, ...], list[str]] = {}
        for label in self.labels:
            covered: set[int] = set()
            # the last built first: a worker keeps its last few models (worker.CACHE_SIZE), so
            # a group split into more parts than that rebuilds only the ones it evicted
            for part, keys in reversed(group.parts.get(label, [])):
                if keys == tuple(cases[i].spec.key() for i in part):
                    jobs.setdefault(tuple(part), []).append(label)
                    covered.update(part)
            for i in range(len(cases)):  # not built with its final spec (or at all) on this backend
                if i not in covered and label not in group.replies[i]:
                    jobs.setdefault((i,), []).append(label)

        tickets: dict[int, tuple[Pack, dict[str, int]]] = {}

        def submit(job: _Job) -> None:
            p = pack([cases[i] for i in job.members])
            self.counts["runs"] += len(job.labels)
            tickets[id(job)] = (p, self.ex.pool.submit_run(p.case.spec, p.case.weights, weights_key(p.case.weights),
                                                          p.case.inputs, labels=job.labels, layers=p.wanted))

        def collect(job: _Job) -> dict[str, Any]:
            p, sent = tickets.pop(id(job))
            got = self.ex.pool.collect_run(sent)
            for label, reply in got.items():
                if isinstance(reply, WorkerFailure):
                    continue
                group.tally.add(label, reply.get("phases", {}))
                for i, own in zip(job.members, p.unpack(reply)):
                    group.replies[i][label] = own
                    if p.size > 1:
                        group.packed[i].add(label)
            return got

        def alone(label: str, i: int, failure: WorkerFailure) -> None:
            group.replies[i][label] = failure

        self._bisect([_Job(labels, list(members)) for members, labels in jobs.items()], collect, alone,
                     submit_all=True, submit=submit)

    # ---- bisection ---------------------------------------------------------------------------
    def _bisect(self, jobs: list[_Job], handle: Callable[[_Job], dict[str, Any]],
                alone: Callable[[str, int, WorkerFailure], None], *, submit_all: bool,
                submit: Callable[[_Job], None] | None = None, dense: bool = True) -> None:
        """Rounds of jobs until every member has an answer on every backend: a job's
        failure on a backend splits it there (halves; one by one when both halves of a
        split fail or the failure was a crash or a timeout); a member failing alone gets
        ``alone``.  ``submit_all``: every job of a round is sent before any is collected
        (runs: the backends compute at once); else ``handle`` sends and waits itself."""
        while jobs:
            if submit_all and submit is not None:
                for job in jobs:
                    submit(job)
            failed: list[tuple[_Job, str, WorkerFailure]] = []
            for job in jobs:
                for label, got in handle(job).items():
                    if isinstance(got, WorkerFailure):
                        failed.append((job, label, got))
            jobs = self._split(failed, alone, dense)

    def _split(self, failed: list[tuple[_Job, str, WorkerFailure]],
               alone: Callable[[str, int, WorkerFailure], None], dense: bool = True) -> list[_Job]:
        """The next round's jobs from this round's failures on each backend: a member
        failing alone gets ``alone``; a pack whose error names some of its members
        (:func:`audee.cases.pack.members_named`) loses them to jobs of their own, the rest goes
        on together (once: when the rest fails too, it is halved); a crash, a timeout, or
        (``dense``) both halves of a split failing: one by one; else halves.  Converting and compiling
        cost about as much per layer in a pack as alone (experiments/bench_pack.py), so
        every member bisection re-tests is paid again: guided splits re-test least."""
        by_parent: dict[tuple[int | None, str], int] = {}
        for job, label, _ in failed:
            if job.parent is not None:
                by_parent[(job.parent, label)] = by_parent.get((job.parent, label), 0) + 1
        nxt: dict[tuple[tuple[int, ...], int | None, bool], list[str]] = {}

        def add(members: Sequence[int], label: str, parent: int | None = None, guided: bool = False) -> None:
            nxt.setdefault((tuple(members), parent, guided), []).append(label)

        for job, label, failure in failed:
            n = len(job.members)
            if n == 1:
                alone(label, job.members[0], failure)
                continue
            named = [] if failure.hard or job.guided else \
                members_named(f"{failure.message}\n{failure.traceback}", n)
            if named and len(named) < n:
                self.counts["guided"] += 1
                for j in named:
                    add([job.members[j]], label)
                add([m for j, m in enumerate(job.members) if j not in named], label, guided=True)
            elif failure.hard or (dense and job.parent is not None and by_parent[(job.parent, label)] > 1):
                log.debug("pack of %d on %s: %s; its cases one by one", n, label, failure.line)
                self.counts["one_by_one"] += 1
                for i in job.members:
                    add([i], label)
            else:
                self._splits += 1
                self.counts["halved"] += 1
                half = (n + 1) // 2
                add(job.members[:half], label, self._splits)
                add(job.members[half:], label, self._splits)
        return [_Job(labels, list(members), parent, guided) for (members, parent, guided), labels in nxt.items()]

    # ---- judging -------------------------------------------------------------------------------
    def _isolated(self, group: _Group, i: int) -> bool:
        """Whether member ``i`` left its packs on some backend (it failed there)."""
        return any(isinstance(r, WorkerFailure) for r in group.replies[i].values())

    def _judge(self, group: _Group, i: int) -> "tuple[Result, dict[str, Any]] | _Pending":
        """Member ``i`` judged on the outcomes its packs gave it; a failure seen with any
        outcome from a pack is left pending, to be confirmed alone (:meth:`_confirmed`)."""
        case, extra = group.made[i]
        modes = self.ex.pool.precisions
        outcomes: dict[str, Outcome] = {}
        for label in self.labels:
            got = group.replies[i].get(label)
            if isinstance(got, WorkerFailure):
                outcomes[label] = Outcome(label, failure=got, precision=modes.get(label, FULL))
            elif got is not None:
                outcomes[label] = Outcome(label, logits=got["logits"], output=got["output"],
                                          nonfinite=list(got["nonfinite"]), run_s=got["run_s"],
                                          declared=got.get("declared"), precision=modes.get(label, FULL))
        share = {label: {p: s / len(group.made) for p, s in phases.items()}
                 for label, phases in group.tally.seconds.items()}
        t0 = time.perf_counter()
        if not group.packed[i]:  # every outcome from the case's own spec: what it gives alone
            return self.ex.judge(case, outcomes, PhaseTally(share), t0), extra
        self.counts["packed"] += 1
        result = self.ex.judge(case, outcomes, PhaseTally(share), t0, diagnose=False)
        if not (result.verdict.failed or any(f.kind == Kind.NAN_PROPAGATED for f in result.verdict.findings)):
            return result, extra  # nothing the diagnosis would look at: judged as alone
        return _Pending(case, extra, result, share)

    def _confirmed(self, pending: "_Pending", alone: Result) -> tuple[Result, dict[str, Any]]:
        """A failure seen in a pack, and the case run alone: the alone result is recorded;
        a failure that did not hold alone is noted (``pack_only``: kind[backends])."""
        self.counts["confirmed"] += 1
        case, extra = pending.case, pending.extra
        unpacked = self.ex.judge(case, alone.outcomes, PhaseTally(), time.perf_counter(), diagnose=False)
        only = sorted(f"{kind}[{','.join(backends)}]" for kind, backends in
                      pending.packed.verdict.signatures() - unpacked.verdict.signatures())
        if only:
            log.warning("case %s: %s only inside a pack; recorded as run alone", case.id, "; ".join(only))
            for label, o in pending.packed.outcomes.items():
                if not o.ok:
                    log.debug("case %s in its pack on %s: %s", case.id, label, o.failure.line)
            extra = {**extra, "pack_only": only}
            self.counts["pack_only"] += 1
        tally = PhaseTally(pending.share)
        for label, phases in alone.phases.items():
            tally.add(label, phases)
        alone.phases = tally.rounded()
        return alone, extra


@dataclass
class _Pending:
    """A packed case whose failure waits to be confirmed alone."""

    case: TestCase
    extra: dict[str, Any]
    packed: Result                           # judged on its packed outcomes, undiagnosed
    share: dict[str, dict[str, float]]       # its share of its packs' worker time


def _key(case: TestCase, extra: dict[str, Any]) -> tuple:
    """What cases packed together share: batch size, dtype policy, invalid flag."""
    return (batch_of(case), str(extra.get("dtype")), bool(extra.get("invalid")))


def run_packed(ex: Executor, items: Sequence[Item], make: MakeCases,
               size: int) -> Iterator[tuple[Result, dict[str, Any]]]:
    """``items`` made into cases by ``make`` (called with a :class:`Planner` standing in
    for ``ex``, and the items to make) and run ``size`` cases per build; each case's
    result and provenance, in ``items``' order, as running it alone would give them."""
    yield from PackRunner(ex, size).run(items, make)


__all__ = ["Planner", "PackRunner", "run_packed"]
