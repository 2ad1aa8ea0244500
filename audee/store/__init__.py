"""The database of what was found: one run directory (RunStore) over case files and the
append-only results table."""
from audee.store.casefile import CASE_FORMAT
from audee.store.caserecord import CaseRecord, load_case, save_case
from audee.store.results import ResultsTable
from audee.store.runstore import RunStore

__all__ = ["CASE_FORMAT", "CaseRecord", "load_case", "save_case", "ResultsTable", "RunStore"]
