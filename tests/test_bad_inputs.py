"""The last bad inputs of issue 31, each one line naming the file and the field (exit 2), or
for the report a warning naming the file and line with the row skipped.  No framework:
each is refused before a worker starts."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from audee.cli import main
from audee.core.errors import AudeeError, ConfigError, SpecError
from audee.core.exitcodes import ExitCode
from audee.settings import MAX_TIMEOUT_S
from tests.helpers import tiny_cnn

LATIN1 = "café".encode("latin-1")   # b"caf\xe9": not UTF-8


def _error_line(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("audee: error: "), err
    assert "Traceback" not in err[0]
    return err[0]


# ---- non-UTF-8 files -----------------------------------------------------------------------------
def test_a_latin1_campaign_is_one_line(tmp_path, capsys):
    bad = tmp_path / "c.yaml"
    bad.write_bytes(b"name: " + LATIN1 + b"\nruns:\n  - seeds: [lenet5]\n    backends: [[jax]]\n")
    code = main(["campaign", str(bad), "--out", str(tmp_path / "o"), "--list-units"])
    assert code == ExitCode.BAD_INPUT
    line = _error_line(capsys)
    assert f"{bad}: not UTF-8 text (byte 0xe9 at offset 9)" in line, line


def test_a_latin1_known_issues_file_names_the_file(tmp_path):
    from audee.triage.known import load_known_file

    bad = tmp_path / "known.yaml"
    bad.write_bytes(b"issues:\n  - id: " + LATIN1 + b"\n")
    with pytest.raises(ConfigError, match=rf"^{bad}: not UTF-8 text"):
        load_known_file(bad)


def test_a_latin1_api_config_names_the_file(tmp_path):
    from audee.apis.config import load_api_config

    bad = tmp_path / "Dense.yaml"
    bad.write_bytes(b"api: Dense\n# " + LATIN1 + b"\n")
    with pytest.raises(ConfigError, match=rf"^{bad}: not UTF-8 text"):
        load_api_config(bad)


def test_a_latin1_search_config_names_the_file(tmp_path):
    from audee.search.config import load_search_config

    bad = tmp_path / "search.yaml"
    bad.write_bytes(b"level: input\n# " + LATIN1 + b"\n")
    with pytest.raises(ConfigError, match=rf"^{bad}: not UTF-8 text"):
        load_search_config(bad)


def test_a_latin1_spec_is_one_line(tmp_path, capsys):
    from audee.cases.spec import ModelSpec

    bad = tmp_path / "spec.json"
    bad.write_bytes(json.dumps(tiny_cnn().to_json()).encode().replace(b'"tiny"', b'"' + LATIN1 + b'"'))
    with pytest.raises(SpecError, match=rf"^{bad}: not UTF-8 text"):
        ModelSpec.load(bad)
    code = main(["fuzz", "--seed", str(bad), "--backends", "jax", "--no-progress", "--out", str(tmp_path / "o")])
    assert code == ExitCode.BAD_INPUT
    assert f"{bad}: not UTF-8 text" in _error_line(capsys)


def test_a_latin1_seed_json_names_the_file(tmp_path):
    from audee.mutation.seeds import load_seed

    (tmp_path / "spec.json").write_text(json.dumps(tiny_cnn().to_json()))
    (tmp_path / "seed.json").write_bytes(b'{"description": "' + LATIN1 + b'"}')
    with pytest.raises(AudeeError, match=rf"^{tmp_path / 'seed.json'}: not UTF-8 text"):
        load_seed(str(tmp_path))


# ---- absurd numbers in a campaign ------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1000000000", "1.0e+9", ".inf"])
def test_a_unit_timeout_beyond_what_the_os_can_wait_is_one_line(tmp_path, capsys, value):
    """A unit's ``timeout: 1e9`` was an OverflowError traceback in every unit (no wait of more
    than 2**31 ms); now it is refused when the file loads."""
    bad = tmp_path / "c.yaml"
    bad.write_text(f"name: t\nruns:\n  - seeds: [lenet5]\n    backends: [[jax]]\n    timeout: {value}\n")
    code = main(["campaign", str(bad), "--out", str(tmp_path / "o"), "--list-units"])
    assert code == ExitCode.BAD_INPUT
    assert f"{bad}: runs[0].timeout: must be <= {MAX_TIMEOUT_S}" in _error_line(capsys)


def test_the_longest_timeout_can_be_waited_for(tmp_path):
    """The bound sits below the OS's limit on a wait (poll takes an int of milliseconds)."""
    import socket
    from multiprocessing.connection import Connection, wait

    a, b = socket.socketpair()
    conn = Connection(a.detach())
    b.send(b"x")
    assert wait([conn], timeout=MAX_TIMEOUT_S) == [conn]   # no OverflowError
    conn.close()
    b.close()
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with pytest.raises(ValueError, match="at most"):
        Pool(parse_backends("jax"), tmp_path, timeout=MAX_TIMEOUT_S * 2)


# ---- complex --inputs --------------------------------------------------------------------------------
def test_complex_inputs_are_refused_not_cut_to_their_real_part(tmp_path, capsys):
    from audee.mutation.seeds import Seed, with_inputs

    spec = tiny_cnn()
    x = np.random.default_rng(0).random((4, 12, 12, 1)) * (1 + 1j)
    np.savez(tmp_path / "x.npz", image=x)
    seed = Seed(spec.name, spec, {}, None, None, 0, "", "user", str(tmp_path / "spec.json"))
    with pytest.raises(AudeeError, match=rf"^{tmp_path / 'x.npz'}: image: complex values \(complex128\)"):
        with_inputs(seed, str(tmp_path / "x.npz"))
    (tmp_path / "spec.json").write_text(json.dumps(spec.to_json()))
    code = main(["fuzz", "--seed", str(tmp_path / "spec.json"), "--inputs", str(tmp_path / "x.npz"),
                 "--backends", "jax", "--no-progress", "--out", str(tmp_path / "o")])
    assert code == ExitCode.BAD_INPUT
    assert "x.npz: image: complex values" in _error_line(capsys)


@pytest.mark.parametrize("array", [np.ones((4, 12, 12, 1), bool), np.full((4, 12, 12, 1), "a")])
def test_non_numeric_inputs_are_refused(tmp_path, array):
    from audee.mutation.seeds import check_inputs

    with pytest.raises(AudeeError, match=r"^x.npz: image: expected real numbers"):
        check_inputs(tiny_cnn(), {"image": array}, "x.npz")


# ---- a results row with an id but nonsense fields ------------------------------------------------------
GOOD = {"id": "c1", "seed": "lenet5", "variant": 0, "status": "pass", "kinds": [], "backends": {"jax": "ok", "torch": "ok"}, "seconds": 0.1,
        "pairs": {}, "signatures": [], "exercised": []}


@pytest.mark.parametrize("bad, field", [
    ({"id": "x"}, "seed"),
    ({"id": "x", "seed": "lenet5"}, "status"),
    ({"id": "x", "seed": "lenet5", "status": "fail", "kinds": "nan", "backends": {"jax": "ok"}}, "kinds"),
    ({"id": "x", "seed": "lenet5", "status": "pass", "kinds": [], "backends": [1, 2]}, "backends"),
    ({**GOOD, "id": "x", "seconds": "fast"}, "seconds"),
    ({**GOOD, "id": 7}, "id"),
    ({**GOOD, "id": "x", "variant": "first"}, "variant"),
])
def test_the_report_skips_a_row_that_is_not_a_test_case(tmp_path, caplog, bad, field):
    from audee.report import load_campaign_dir

    rows = tmp_path / "results.jsonl"
    rows.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n")
    with caplog.at_level(logging.WARNING, logger="audee"):
        data = load_campaign_dir(tmp_path)
    assert list(data.cases["id"]) == ["c1"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(f"{rows}:2: skipping a row that is not a test case "
                                                         f"({field}: "), warnings


def test_audee_report_warns_skips_and_writes(tmp_path, capsys):
    rows = tmp_path / "results.jsonl"
    rows.write_text(json.dumps(GOOD) + "\n" + json.dumps({"id": "x", "seed": "lenet5", "status": "maybe"}) + "\n")
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "report")]) == ExitCode.OK
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == [f"audee: WARNING: {rows}:2: skipping a row that is not a test case (status: expected one of "
                   "pass, fail, rejected, got 'maybe')"], err
    assert "1 test cases" in (tmp_path / "report" / "index.md").read_text()
