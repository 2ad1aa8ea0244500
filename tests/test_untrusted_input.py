"""What audee takes from outside is data, bounded (audee.core.bounded): a backend's message that is
no valid UTF-8 or 10 MB long, and files that are named pipes or devices.

A real plugin backend (``tests.plugins.GarblingBackend``, JAX underneath) raises such a
message inside a real worker, so the whole path runs: worker, pool, oracle, signature,
results row, case file, known-issue match, summary, repro scripts, ``audee report``, resume.
The reads run as ``audee`` subprocesses: a hang there is caught by the subprocess timeout,
which is a guard only (nothing is asserted about time).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audee.core.bounded import MESSAGE_LIMIT, clean_text, read_bytes, utf8
from audee.core.errors import AudeeError

ROOT = Path(__file__).resolve().parents[1]
GARBLING = "tests.plugins:GarblingBackend"
GUARD_S = 600  # a guard against a hang, not a timed assertion


def _audee(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "audee", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=GUARD_S)


def _one_error(r: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("audee: error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _valid_text(s: str) -> bool:
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


# ---- the helper itself -----------------------------------------------------------------------------
def test_clean_text_replaces_surrogates_and_bad_bytes_and_bounds_length():
    assert clean_text("caf\udce9 \ud800!") == "caf\ufffd \ufffd!"
    assert clean_text(b"ab\xff") == "ab\ufffd"
    assert clean_text(None) == "" and clean_text("plain") == "plain"
    huge = "ValueError: head " + "x" * 10_000_000 + " the tail"
    out = clean_text(huge)
    assert len(out) < MESSAGE_LIMIT + 100 and out.startswith("ValueError: head") and out.endswith("the tail")
    assert "characters left out by audee" in out
    assert utf8("x\udcff") == "x\ufffd".encode()


# ---- consumers are safe for any str (rows written before the fix, plugins) --------------------------
def test_signature_and_known_match_of_a_message_with_surrogates():
    """Before: ``short_hash`` raised UnicodeEncodeError on a lone surrogate."""
    from audee.triage.known import KnownIssue, match_known
    from audee.triage.signature import Signature, normalize_error

    d = {"kind": "divergent_acceptance", "backends": ["jax", "torch"], "phase": "run",
         "error": "OSError: cannot open /data/caf\udce9.bin", "error_full": "OSError: cannot open caf\udce9 " * 3}
    sig = Signature.from_json(d)
    assert len(sig.short_hash()) == 8 and _valid_text(sig.key()) and _valid_text(json.dumps(sig.to_json()))
    assert _valid_text(normalize_error("OSError: caf\udce9 " + "y" * 10_000_000, whole=True))
    issue = KnownIssue.model_validate({"id": "garbled", "title": "t", "note": "n", "link": "https://x.org/1",
                                       "match": {"kind": "divergent_acceptance", "error": "cannot open"}})
    assert match_known(d, [issue]) is issue


# ---- a real backend saying garbled, huge words -----------------------------------------------------
@pytest.fixture(scope="module")
def garbled_run(tmp_path_factory):
    """A fuzz run where one backend raises GARBLED_MESSAGE on every batch.  Before the fix it
    died in ``signature.short_hash`` at its first case (and so did every resume)."""
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, fuzz
    from audee.mutation.seeds import load_seed

    out = tmp_path_factory.mktemp("garbled") / "run"
    seed = load_seed("lenet5")
    cfg = FuzzConfig(parse_backends(f"jax,{GARBLING}"), out, variants=1, batch=4, rng=5, invalid_prob=0.0)
    stats = fuzz(seed, seed.inputs, cfg)
    assert stats.run == 2
    again = fuzz(seed, seed.inputs, cfg)  # the resume: every case is done, nothing dies
    assert again.run == 0
    return out


def test_rows_and_case_files_hold_bounded_valid_text(garbled_run):
    from audee.cases.case import Verdict
    from audee.store import RunStore

    store = RunStore(garbled_run)
    lines = store.results_path.read_bytes().splitlines()
    assert len(lines) == 2
    for raw in lines:
        assert len(raw) < 200_000  # not 10 MB per row
        row = json.loads(raw)
        assert row["status"] == "fail" and _valid_text(json.dumps(row, ensure_ascii=False))
        message = row["errors"][GARBLING]
        assert "cannot open /data/caf\ufffd.bin: bad \ufffd byte" in message
        record = store.load_case(row["case_file"])
        (finding,) = [f for f in Verdict.from_json(record.verdict).findings if f.kind == "divergent_acceptance"]
        full = finding.detail.errors[GARBLING].message
        assert "characters left out by audee" in full and full.endswith("end of the dump")
        assert len(full) < MESSAGE_LIMIT + 100 and _valid_text(full)


def test_summary_known_issue_and_repro_scripts_of_the_garbled_run(garbled_run, tmp_path):
    from audee.fuzz import summarize
    from audee.triage.known import load_known_file, unique_bugs
    from audee.store import RunStore

    known = tmp_path / "known.yaml"
    known.write_text("issues:\n  - id: garbled-open\n    title: t\n    note: n\n    link: https://x.org/1\n"
                     "    match:\n      kind: divergent_acceptance\n      error: 'cannot open'\n")
    issues = load_known_file(known)
    summary = summarize(garbled_run, known=issues)
    assert summary["unique_bugs"] >= 1 and summary["classes"]
    store = RunStore(garbled_run)
    bugs = unique_bugs([store.placed(r) for r in store.rows()], issues)
    assert bugs and all(b.known_id == "garbled-open" and _valid_text(b.error) for b in bugs)


def test_report_on_the_garbled_run_and_on_rows_with_surrogates(garbled_run, tmp_path):
    run = tmp_path / "run"
    subprocess.run(["cp", "-r", str(garbled_run), str(run)], check=True)
    # a row written by an older audee, its message escaped in JSON as a lone surrogate
    path = run / "results.jsonl"
    rows = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    for row in rows:
        row["errors"][GARBLING] = "OSError: caf\udce9 " + row["errors"][GARBLING]
        for sig in row["signatures"]:
            sig["error"] = "OSError: caf\udce9"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    for extra in ([], ["--resign"]):
        out = tmp_path / ("report" + "".join(extra))
        r = _audee("report", str(run), "--out", str(out), *extra)
        assert r.returncode == 0, r.stderr[-3000:]
        assert (out / "index.md").is_file()
        for f in out.rglob("*.md"):
            f.read_text(encoding="utf-8")  # valid UTF-8 throughout


def _as_torch(obj):
    """A case record with the plugin's label and target made torch's: the garbled words as
    if PyTorch had said them (a repro script runs built-in backends only)."""
    if isinstance(obj, dict):
        return {_as_torch(k): _as_torch(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_as_torch(v) for v in obj]
    if isinstance(obj, str) and obj == GARBLING:
        return "torch"
    return obj


def test_audee_repro_writes_a_script_for_a_garbled_case(garbled_run, tmp_path):
    from audee.store.casefile import encode, read_case_bytes

    record = read_case_bytes(sorted((garbled_run / "cases").glob("*.pkl"))[0])
    record = _as_torch(record)
    for b in record["backends"]:
        if b["label"] == "torch":
            b["target"] = "audee.backends.keras_backends:TorchBackend"
    case = tmp_path / "case.pkl"
    case.write_bytes(encode(record))
    r = _audee("repro", str(case), "--out", str(tmp_path / "repro"), "--no-run")
    assert r.returncode == 0, r.stderr[-3000:]
    (script,) = (tmp_path / "repro").glob("*.py")
    compile(script.read_text(encoding="utf-8"), str(script), "exec")


# ---- reads that cannot hang --------------------------------------------------------------------------
@pytest.fixture
def bad_files(tmp_path):
    """A named pipe and a symlink to /dev/zero, each under the names a reader expects."""
    def make(name: str) -> dict[str, Path]:
        fifo, zero = tmp_path / f"fifo-{name}", tmp_path / f"zero-{name}"
        os.mkfifo(fifo)
        zero.symlink_to("/dev/zero")
        return {"named pipe": fifo, "character device": zero}
    return make


def test_read_bytes_refuses_pipes_devices_and_large_files(bad_files, tmp_path):
    for what, path in bad_files("x").items():  # the pipe is opened non-blocking, never read
        with pytest.raises(AudeeError, match=f"{path}: not a regular file \\(a {what}\\)"):
            read_bytes(path, 1 << 20)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(AudeeError, match="larger than the 100 bytes"):
        read_bytes(big, 100)
    assert read_bytes(big, 101) == b"x" * 101


@pytest.mark.parametrize("command", ["reproduce", "localize", "repro"])
def test_case_file_commands_refuse_pipes_and_devices(command, bad_files):
    """Before: a pipe blocked the open forever; /dev/zero was read until memory ran out."""
    for what, path in bad_files(f"{command}.pkl").items():
        r = _audee(command, str(path))
        assert r.returncode == 2, r.stderr[-3000:]
        assert f"{path}: not a regular file (a {what})" in _one_error(r)


def test_config_spec_and_input_files_refuse_pipes_and_devices(bad_files, tmp_path):
    for what, spec in bad_files("spec.json").items():
        r = _audee("fuzz", "--seed", str(spec), "--backends", "jax", "--out", str(tmp_path / "o"))
        assert r.returncode == 2 and f"{spec}: not a regular file (a {what})" in _one_error(r)
    for what, config in bad_files("campaign.yaml").items():
        r = _audee("campaign", str(config), "--out", str(tmp_path / "c"))
        assert r.returncode == 2 and f"{config}: not a regular file (a {what})" in _one_error(r)
    for what, known in bad_files("known.yaml").items():
        r = _audee("report", str(tmp_path), "--known-issues", str(known))
        assert r.returncode == 2 and f"{known}: not a regular file (a {what})" in _one_error(r)
    for what, inputs in bad_files("inputs.npz").items():
        r = _audee("fuzz", "--seed", "lenet5", "--backends", "jax", "--inputs", str(inputs),
                   "--out", str(tmp_path / "i"))
        assert r.returncode == 2 and f"{inputs}: not a regular file (a {what})" in _one_error(r)


def test_report_resign_keeps_rows_whose_case_file_is_a_pipe_or_a_device(garbled_run, tmp_path):
    """Before: ``--resign`` hung on a pipe and read /dev/zero until memory ran out."""
    run = tmp_path / "run"
    subprocess.run(["cp", "-r", str(garbled_run), str(run)], check=True)
    path = run / "results.jsonl"
    rows = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    fifo = run / rows[0]["case_file"]
    fifo.unlink()
    os.mkfifo(fifo)              # the first row's case file is a pipe
    rows[1]["case_file"] = "/dev/zero"  # the second row names a device
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    r = _audee("report", str(run), "--out", str(tmp_path / "report"), "--resign")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"{fifo}: not a regular file (a named pipe)" in r.stderr
    assert "/dev/zero: not a regular file (a character device)" in r.stderr
    assert (tmp_path / "report" / "index.md").is_file()


def test_results_table_that_is_a_pipe_is_one_error_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "results.jsonl")
    r = _audee("report", str(run), "--out", str(tmp_path / "report"))
    assert r.returncode == 2 and "results.jsonl: not a regular file (a named pipe)" in _one_error(r)
