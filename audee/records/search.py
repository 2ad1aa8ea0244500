"""A search run's records: its row in ``searches.jsonl`` (:class:`SearchRun`) and its trace
``traces/<id>.json`` (:class:`SearchTrace`, one :class:`Generation` per generation).

Both say why the run stopped (``budget``, ``max_iter``, ``first_finding``, ``interrupted``:
audee.search.engine.STOP_REASONS); an ``interrupted`` run is run again on resume, and its
new row is the one readers keep (:func:`last_runs`).  Built by audee.search.runner and read
by resume, the campaign's localization stage and the report, only through these types.
Fields that came later have defaults; unknown keys are kept.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, ValidationError

from audee.records.rows import Number, RowRejected, parse_object


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the keys it was built or read with (declared ones in the order
        audee writes them, then unknown ones)."""
        return self.model_dump(exclude_unset=True)


class SearchRun(_Record):
    """One search run's row: what ran (target, search kind, level, fitness, seed input row)
    and what came of it (the engine's SearchOutcome without its trace)."""

    id: str                                # <target>-<search>-<level>-<fitness>-r<rng>
    target: str | None = None              # the seed or variant case id searched
    search: str | None = None              # ga, random
    level: str | None = None               # input, weight, input-weight
    fitness: str | None = None             # inconsistency, nan, ...
    input_row: int | None = None
    stopped: str | None = None             # why it stopped (rows before stop reasons: None)
    generations: int = 0
    evaluations: int = 0
    seconds: Number = 0.0
    first_failure_s: Number | None = None
    failures: list[str] = []               # case ids written
    best_fitness: Number = 0.0
    evals_per_s: Number = 0.0


class Generation(_Record):
    """One generation of a trace: the best fitness (None: no finite value yet) and the
    best individual's per-layer profile (the data behind the paper's Figure 3)."""

    generation: int
    best: Number | None = None
    mean: Number | None = None
    pair: str = ""
    evaluated: int = 0
    eval_s: Number = 0.0
    failures: int = 0
    elapsed_s: Number = 0.0
    layers: dict[str, Any] = {}


class SearchTrace(_Record):
    """A search run's trace: its settings (audee.search.config.SearchConfig's dump), why it
    stopped, and its generations."""

    id: str
    config: dict[str, Any] = {}
    stopped: str | None = None
    trace: list[Generation] = []

    @property
    def level(self) -> str | None:
        return self.config.get("level")

    @property
    def search(self) -> str:
        return str(self.config.get("search", "ga"))

    @property
    def fitness(self) -> str | None:
        return self.config.get("fitness")

    def dumps(self) -> bytes:
        """The trace file's bytes (indented JSON, as audee always wrote it)."""
        return json.dumps(self.to_json(), indent=1).encode()


def parse_search_run(raw: bytes | str) -> SearchRun:
    """A ``searches.jsonl`` row from its line, or :class:`RowRejected` with the reason."""
    obj = parse_object(raw)
    try:
        return SearchRun.model_validate(obj)
    except ValidationError as exc:
        e = exc.errors()[0]
        field = str(e["loc"][0]) if e["loc"] else "row"
        raise RowRejected(f"a row that is not a search run ({field}: {e['msg'][0].lower()}{e['msg'][1:]}, "
                          f"got {obj.get(field)!r:.60})") from None


def parse_trace(raw: bytes | str) -> SearchTrace:
    """A trace file's content, or :class:`RowRejected` with the reason."""
    try:
        return SearchTrace.model_validate(json.loads(raw))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RowRejected("a trace that is not valid JSON") from None
    except ValidationError as exc:
        e = exc.errors()[0]
        raise RowRejected(f"a trace that is not one ({'.'.join(map(str, e['loc'])) or 'trace'}: {e['msg']})") from None


def last_runs(runs: Iterable[SearchRun]) -> dict[str, SearchRun]:
    """Each search run's last row by id (an interrupted run's rerun replaces its row)."""
    return {r.id: r for r in runs}
