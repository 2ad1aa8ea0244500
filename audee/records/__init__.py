"""Typed records: what audee writes and reads back (finding details, results rows, search
runs, localization reports), each a declared type.  Plain data: this package imports only
the base layer, ``spec`` and ``weights``."""
from audee.records.findings import *  # noqa: F401,F403 - each finding kind's detail
from audee.records.localization import *  # noqa: F401,F403 - the localization report
from audee.records.rows import PlacedRow, ResultRow, RowRejected, parse_row  # noqa: F401 - a results row
from audee.records.search import Generation, SearchRun, SearchTrace  # noqa: F401 - a search run and its trace
