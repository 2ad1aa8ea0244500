import os
import pickle

import numpy as np
import pytest

from audee.core.errors import CaseFileError
from audee.settings import TIE_MARGIN
from audee.store import CaseRecord, load_case, save_case
from tests.helpers import tiny_cnn

GOOD = {"id": "x-v00001", "spec": tiny_cnn().to_json(), "weights": {"d": [np.ones((2, 2), np.float32)]},
        "inputs": {"image": np.zeros((1, 12, 12, 1), np.float32)},
        "backends": [{"label": "tensorflow", "target": "audee.backends.keras_backends:TensorflowBackend",
                      "device": "cpu"}],
        "verdict": {"findings": []}, "versions": {}, "scalar": np.float32(1.5), "mixed": [1, "a", None, (2, 3.0)]}


def test_round_trip(tmp_path):
    p = save_case(tmp_path / "c.pkl", GOOD)
    back = load_case(p)
    assert back["id"] == "x-v00001"
    np.testing.assert_array_equal(back["weights"]["d"][0], GOOD["weights"]["d"][0])
    assert back["scalar"] == np.float32(1.5)


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ["AUDEE_EVIL_MARK"],))


def test_malicious_pickle_refused_and_not_executed(tmp_path, monkeypatch):
    mark = tmp_path / "pwned"
    monkeypatch.setenv("AUDEE_EVIL_MARK", str(mark))
    evil = dict(GOOD, format="audee.case/1", payload=_Evil())
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(evil))
    with pytest.raises(CaseFileError, match="refusing to load (posix|os).system"):
        load_case(path)
    assert not mark.exists()


@pytest.mark.parametrize("payload, words", [
    (b"not a pickle at all", "not an audee case file"),
    (pickle.dumps([1, 2, 3]), "top level is list"),
    (pickle.dumps({"format": "other"}), "format"),
    (pickle.dumps({k: v for k, v in dict(GOOD, format="audee.case/1").items() if k != "spec"}), "spec: missing"),
    (pickle.dumps(dict(GOOD, format="audee.case/1", inputs={"image": [1, 2]})), "inputs.image"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", verdict=[1])), "verdict: expected dict"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", verdict={"findings": [{"kind": "boom"}]})),
     "verdict.findings[0].kind"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", verdict={"findings": [{"kind": "nan", "backends": "tf"}]})),
     "verdict.findings[0].backends"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", verdict={"findings": None})), "verdict.findings"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", inputs={})), "inputs: empty"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", inputs={"tokens": np.zeros((1, 3))})), "inputs.tokens"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", inputs={"image": np.zeros((2, 12, 12))})), "inputs.image"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", spec={"name": "x"})), "spec: inputs: missing"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", weights={"d": [1.0]})), "weights.d"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", tie_margin=-1.0)), "tie_margin"),
    (pickle.dumps(dict(GOOD, format="audee.case/2", backends=[{"label": "x"}])), "backends[0].target"),
])
def test_malformed_case_files_get_one_line_errors(tmp_path, payload, words):
    path = tmp_path / "bad.pkl"
    path.write_bytes(payload)
    with pytest.raises(CaseFileError) as err:
        load_case(path)
    assert str(path) in str(err.value) and words in str(err.value)
    assert "\n" not in str(err.value)


class Foreign(str):
    """A str subclass from outside numpy/builtins, like torch's TorchVersion."""


def test_a_record_that_could_not_be_read_back_is_never_written(tmp_path):
    with pytest.raises(ValueError, match="holds a type case files may not"):
        save_case(tmp_path / "c.pkl", dict(GOOD, versions={"torch": {"torch": Foreign("2.13")}}))
    assert not (tmp_path / "c.pkl").exists()


def test_record_round_trip_keeps_fields_and_provenance(tmp_path):
    rec = CaseRecord.from_dict(dict(GOOD, tie_margin=0.25, seed="lenet5", variant=3, mutations=[]), new=True)
    assert rec.meta["seed"] == "lenet5" and rec.tie_margin == 0.25 and rec.tolerances == {}
    back = CaseRecord.from_file(rec.to_file(tmp_path / "c.pkl"))
    assert back.format == "audee.case/2" and back.tie_margin == 0.25 and back.meta["variant"] == 3
    assert back.backends[0].label == "tensorflow" and back.verdict_obj().findings == []
    case = back.test_case()
    assert case.id == "x-v00001" and case.batch == 1 and case.meta["seed"] == "lenet5"


def test_format_1_files_still_load_with_the_default_tie_margin(tmp_path):
    path = tmp_path / "old.pkl"
    path.write_bytes(pickle.dumps(dict(GOOD, format="audee.case/1")))
    rec = CaseRecord.from_file(path)
    assert rec.format == "audee.case/1" and rec.tie_margin == TIE_MARGIN
