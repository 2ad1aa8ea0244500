"""A new root cause counts as a new bug only where its script, run again alone, reproduces."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from audee.report.alone import ALONE_FILE, recheck_new
from audee.report.bugreports import write_bug_reports
from audee.triage import FIXED, REPRODUCES, NumericRoot, RootCause
from audee.triage.rootcause import new_bugs_line

SCRIPT = '''"""A standalone script of the shape audee writes (its verdict line, its exit code)."""
import pathlib, sys
runs = pathlib.Path(__file__).with_suffix(".runs")
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
print("{line}")
sys.exit({code})
'''


def _root(tmp: Path, name: str, line: str, code: int, **kw) -> RootCause:
    script = tmp / f"{name}.py"
    script.write_text(SCRIPT.format(line=line, code=code))
    return RootCause(NumericRoot("deviation", ("torch",), name, ()), kw.pop("klass", "bug"), "no rule clears it",
                     "deviation", name, 1, 1, f"case-{name}", repro=str(script), **kw)


def test_a_new_root_whose_script_does_not_reproduce_alone_is_said_apart(tmp_path: Path):
    roots = [_root(tmp_path, "Dense", "REPRODUCED: tensorflow and torch disagree", 1),
             _root(tmp_path, "GroupNormalization", "NOT REPRODUCED: no longer on these versions", 0),
             _root(tmp_path, "Conv2D", "NOT REPRODUCED", 0, klass="undefined")]
    assert new_bugs_line(roots).startswith("new bugs: 2 ")
    out = tmp_path / "report"
    out.mkdir()
    got = recheck_new(roots, out)
    assert [g.alone for g in got] == [REPRODUCES, FIXED, None]      # an undefined root is not run
    assert [g.new_bug for g in got] == [True, False, False]
    assert new_bugs_line(got) == ("new bugs: 1 (found before: 0, known upstream: 0, fixed upstream: 0); "
                                  "1 more whose script did not reproduce alone")
    assert list(write_bug_reports(got, out)) == [roots[0].root]          # a report for the one that reproduced
    # a report again, the first root now known: its bug report goes, nothing else in the folder is made
    assert [p.stem.split("-")[0] for p in (out / "bugs").glob("*.md")] == ["deviation"]
    assert write_bug_reports([replace(got[0], known_id="x"), *got[1:]], out) == {}
    assert list((out / "bugs").glob("*.md")) == []
    assert RootCause.from_json(got[1].to_json()).alone == FIXED           # a summary keeps it
    # kept per script text: a rerun (after a kill) runs no script again
    assert set(json.loads((out / ALONE_FILE).read_text()).values()) == {REPRODUCES, FIXED}
    recheck_new(roots, out)
    assert (tmp_path / "Dense.runs").read_text() == "x"
