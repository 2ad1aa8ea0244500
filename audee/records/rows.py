"""The results row: one test case run, as ``results.jsonl`` holds it (one JSON object a line).

:class:`ResultRow` declares every field ``audee fuzz`` writes (the verdict's summary, then
the provenance of network-level, API-level and search-found cases); rows are built and
read only through it.  Fields added over time have defaults, so older rows still load;
keys it does not declare are kept (``extra="allow"``), so a newer row read by an older
reader, or a key a caller added, survives.  A row dumps (:meth:`ResultRow.to_json`) the
keys it was given and no others: the JSON line is the one audee always wrote.

:func:`parse_row` is the one reader of a stored line: a row, or :class:`RowRejected`
saying why not (not JSON, not an object with an id, a field of the wrong type), which
readers turn into a warning naming the file and line, and skip.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from audee.records.reference import ReferenceRun

#: a row's status: the verdict's (audee.cases.case.Verdict.status)
STATUSES = ("pass", "fail", "rejected")

Number = int | float                      # kept as written: an int stays an int in the JSON line
NonEmpty = Annotated[str, Field(min_length=1)]


class RowRejected(ValueError):
    """A stored line that is no results row; ``what`` completes "skipping ..." in the
    warning a reader writes (``file:line: skipping <what>``)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


class ResultRow(BaseModel):
    """One test case's row.  Strict types (JSON's own: a bool is no number, a string no
    list): a row with an id but nonsense in a field is refused, not miscounted later."""

    model_config = ConfigDict(strict=True, extra="allow")

    # ---- what every row holds (the order is the order problems are reported in)
    id: NonEmpty
    seed: NonEmpty | None = None          # the seed's name (``api:<API>`` for API-level cases); stored rows have it
    status: Literal["pass", "fail", "rejected"]
    kinds: list[str]                      # finding kinds, sorted
    backends: Annotated[dict[str, str], Field(min_length=1)]   # backend -> "ok" or "<failure kind>:<phase>"
    # ---- the verdict's summary (defaults: rows written before the field was)
    errors: dict[str, str] = {}           # failing backend -> its error message, one line
    pairs: dict[str, dict[str, Any]] = {}  # backend pair -> distance, flips, ties
    nan: dict[str, str] = {}              # backend -> first non-finite layer (older rows: layer -> backend)
    nan_finite: list[str] = []
    nan_strong: bool = False
    propagated_nonfinite: bool = False
    inconsistent_pairs: list[str] = []
    deviating_pairs: list[str] = []
    regression_pairs: list[str] = []        # version pairs that differ, older|newer (audee.oracle.regression)
    versions: dict[str, dict[str, str]] = {}  # each side of such a pair -> the versions its worker reported
    equivalence: dict[str, str] = {}       # equivalence rule -> pass | fail | accumulated | harness (rules applied)
    reference: ReferenceRun | None = None  # the float64 reference (--reference float64): every backend's error
    signatures: list[dict[str, Any]] = []  # audee.triage.signature.Signature.to_json(), one per failure finding
    exercised: list[list[str]] = []        # [api, param, value] triples (audee.oracle.exercised)
    seconds: Number = 0.0
    phases: dict[str, dict[str, Number]] = {}  # backend -> phase -> seconds (audee.store.results.phases_field)
    case_file: str | None = None           # relative to the run directory; failing cases only
    # ---- a converter's refusals remembered (audee/engine/refusals.py, API-level cases): the backends
    # left out of this case, each with {"reason": the refusal's words, "cases": the cases that saw it};
    # this case's own explicit refusals (backend -> reason), from which a resumed run skips the same
    skipped: dict[str, dict[str, Any]] = {}
    refused: dict[str, str] = {}
    # ---- provenance: network-level cases
    variant: int | None = None             # variant index, -1 for the seed itself
    rng: int | None = None
    mutations: list[str] = []              # "layer.param=value" per mutation
    input_rows: list[int] = []             # the seed input rows of the batch
    weight_seed: int | None = None
    invalid: bool | None = None            # a crafty invalid value was drawn
    special_inputs: list[dict[str, Any]] = []  # audee.mutation.special.inject's record
    # ---- provenance: API-level cases (audee.mutation.apilevel)
    api: str | None = None
    dtype: str | None = None
    data_format: Any = None                # a drawn parameter value (an invalid draw may be anything)
    rank: int | None = None
    input_shapes: dict[str, list[int]] = {}
    adapters: list[Any] = []
    params: dict[str, Any] = {}
    derived: dict[str, Any] = {}
    invalid_param: dict[str, Any] | None = None
    redraws: int | None = None
    build_error: str | None = None
    # ---- provenance: search-found cases (audee.search)
    search_id: str | None = None
    input_row: int | None = None
    generation: int | None = None
    level: str | None = None               # the search level (input, weight, input-weight)
    fitness: str | None = None
    special_values: dict[str, int] = {}     # special values the found input carries (audee.mutation.special.describe)
    # ---- the training phase (audee.train): absent for an inference case
    phase: Literal["train"] | None = None
    train: dict[str, Any] | None = None     # setup (loss, optimizer, ...), inactive/unjudged layers, skipped backends, losses

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        """A null where a field has a default reads as that default (the report always
        accepted nulls there)."""
        if isinstance(data, dict) and any(v is None for v in data.values()):
            data = {k: (_default_of(k) if v is None and k in _NOT_NULL else v) for k, v in data.items()}
        return data

    @classmethod
    def build(cls, fields: Mapping[str, Any]) -> "ResultRow":
        """A new row from a run's values (numpy scalars and tuples as JSON will hold them)."""
        return cls.model_validate(plain(dict(fields)))

    def to_json(self) -> dict[str, Any]:
        """The row's JSON object: the keys it was built or read with, unknown ones included."""
        return self.model_dump(exclude_unset=True)

    @property
    def extra(self) -> dict[str, Any]:
        """Keys this type does not declare (a newer audee's, or a caller's), as read."""
        return dict(self.model_extra or {})

    @property
    def failed(self) -> bool:
        return self.status == "fail"


_NOT_NULL = {name for name, f in ResultRow.model_fields.items()
             if not f.is_required() and f.default is not None}


def _default_of(name: str) -> Any:
    return ResultRow.model_fields[name].get_default(call_default_factory=True)


# what a stored row's field must be, for the warning (the old report check's words)
_EXPECTED = {"id": "a non-empty string", "seed": "the seed's name", "status": f"one of {', '.join(STATUSES)}",
             "kinds": "a list of finding kinds", "backends": "an object of backend -> status",
             "seconds": "a number", "variant": "int"}


def parse_object(raw: bytes | str) -> dict[str, Any]:
    """A line of any audee table (results, searches, ...): a JSON object with an id, or
    :class:`RowRejected` saying it is not valid JSON or not such an object."""
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RowRejected("a line that is not valid JSON") from None
    if not isinstance(obj, dict) or "id" not in obj:
        raise RowRejected("a line that is not a row (a JSON object with an id)")
    return obj


def parse_row(raw: bytes | str | Mapping[str, Any]) -> ResultRow:
    """A stored row from its JSON line (or the object already parsed); :class:`RowRejected`
    with the reason otherwise.  A stored row names its seed: every row audee wrote does."""
    obj = dict(raw) if isinstance(raw, Mapping) else parse_object(raw)
    problems: list[tuple[str, str]] = []
    row = None
    try:
        row = ResultRow.model_validate(obj)
    except ValidationError as exc:
        problems += [(str(e["loc"][0]) if e["loc"] else "row", e["msg"]) for e in exc.errors()]
    if not isinstance(obj.get("seed"), str) or not obj["seed"]:
        problems.append(("seed", "missing"))
    if problems:
        order = list(ResultRow.model_fields)
        field, msg = min(problems, key=lambda p: order.index(p[0]) if p[0] in order else len(order))
        what = f"expected {_EXPECTED[field]}" if field in _EXPECTED else msg[0].lower() + msg[1:]
        raise RowRejected(f"a row that is not a test case ({field}: {what}, got {obj.get(field)!r:.60})")
    assert row is not None
    return row


@dataclass(frozen=True)
class PlacedRow:
    """A results row and where it was read: the campaign unit (None for a plain fuzz run),
    its case file resolved against the run directory, and that directory's repro scripts
    folder.  Readers that merge run directories (unique bugs, the report) need all three."""

    row: ResultRow
    unit: str | None = None
    case_path: str | None = None
    repro_dir: str | None = None


def plain(value: Any) -> Any:
    """``value`` as JSON holds it: numpy scalars and arrays as Python numbers and lists,
    tuples as lists (what the JSON line of a row always held)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
