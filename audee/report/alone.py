"""Each new root cause's standalone script run again alone before the report counts it.

A campaign's case can fail in the run and not in a fresh process (a worker's state, a
nondeterministic kernel, a tie the batch broke): its script then prints NOT REPRODUCED, and a
maintainer handed it as a new bug cannot act on it.  ``audee report --recheck-new`` runs the
script of every new root cause of class ``bug`` once, alone (:func:`audee.repro.recheck.recheck_script`),
and records what it printed as the root's ``alone``; the new-bugs line counts only the ones
that reproduced and says the rest apart.  Results are kept per script text in
``<report>/alone.json``, written after each script, so a rerun after a kill runs only the rest.
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path

from audee.core.bounded import utf8
from audee.repro.recheck import TIMEOUT_S, executable, recheck_script
from audee.store.atomic import write_atomic
from audee.triage import NEW, RECHECK_RESULTS, RootCause

log = logging.getLogger(__name__)

#: the file under the report directory that keeps each script's result by its text's sha256
ALONE_FILE = "alone.json"


def _load(path: Path) -> dict[str, str]:
    """The kept results, those of a known result only (a damaged file is started again)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in doc.items() if v in RECHECK_RESULTS} if isinstance(doc, dict) else {}


def recheck_new(roots: list[RootCause], out: Path, python: str | None = None,
                timeout: float = TIMEOUT_S) -> list[RootCause]:
    """``roots`` with ``alone`` set on each new root cause of class ``bug`` that has a repro
    script (run alone with ``python``, this interpreter when None); the others as they were."""
    exe = executable(python)
    path = Path(out) / ALONE_FILE
    kept = _load(path)
    done = []
    for g in roots:
        script = Path(g.repro) if g.repro else None
        if g.klass != "bug" or g.status != NEW or script is None or not script.is_file():
            done.append(g)
            continue
        sha = hashlib.sha256(script.read_bytes()).hexdigest()
        if sha not in kept:
            got = recheck_script(script, exe, timeout)
            log.info("%s alone: %s (%s)", script.name, got.result, got.line)
            kept[sha] = got.result
            write_atomic(path, utf8(json.dumps(kept, indent=1, sort_keys=True)))
        done.append(replace(g, alone=kept[sha]))
    return done
