"""Score localization on the ground-truth corpus (``localize/corpus.yaml``).

For each case: run the edited seed on the reference backend (TensorFlow unless the entry
names another) and the faulty backend; if the seed batch shows no failure, search for an
inconsistency with the GA; write the case file; localize it; compare the top-1 (layer,
parameter) with the truth (or, for an input-borne trigger, that the input is named).
Controls must localize nothing.  Prints the paper's Table 2 columns, precision and recall
per faulty backend, and the localization time per case with the workers' start-up.

For a case on built-in backends only (a real bug, no fault plugin), the one-layer repro
script of the top candidate is also written (``audee localize --repro``) and run
standalone; it must print REPRODUCED.

    python -m localize.scorer [--only ID ...] [--corpus localize/corpus.yaml] [--json OUT] [--no-repro]
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.core.errors import ConfigError
from audee.engine.execute import Executor, Result
from audee.fuzz import case_record
from audee.localize import LocalizeConfig, Localizer, Report
from audee.localize.run import localize_case, with_repro
from audee.repro import SCRIPT_TIMEOUT_S
from audee.search.engine import Search, SearchConfig
from audee.mutation.seeds import load_seed
from audee.cases.spec import ModelSpec
from audee.store import save_case
from audee.store.caserecord import BUILTIN_TARGETS, CaseRecord
from audee.core.yamlio import read_yaml_mapping

CORPUS = Path(__file__).resolve().parent / "corpus.yaml"
ENTRY_KEYS = {"id", "seed", "fault", "edit", "edit_api", "truth", "also", "backends", "reference", "insert",
              "input_scale", "nan_pixels", "note", "faulty"}
FAILURE_KINDS = (Kind.INCONSISTENCY, Kind.NAN, Kind.DIVERGENT_ACCEPTANCE, Kind.HARD_CRASH, Kind.DEVIATION)


@dataclass
class Entry:
    id: str
    seed: str
    fault: str | None = None
    edit: dict[str, Any] = field(default_factory=dict)
    edit_api: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, str] | None = None
    also: list[str] = field(default_factory=list)
    backends: list[str] | None = None
    reference: str = "tensorflow"
    insert: list[dict[str, Any]] = field(default_factory=list)
    input_scale: float = 1.0
    nan_pixels: int = 0
    note: str = ""
    faulty: str | None = None   # a real bug (no injected fault): the backend it is on
    control: bool = False

    @property
    def labels(self) -> list[str]:
        return self.backends or [self.reference, self.fault]

    @property
    def faulty_backend(self) -> str:
        """The framework the fault alters (``faulty`` for a real bug, else ``none``)."""
        if not self.fault:
            return self.faulty or "none"
        module, _, cls = self.fault.partition(":")
        return str(getattr(getattr(importlib.import_module(module), cls), "framework", "?"))


def load_corpus(path: str | Path = CORPUS) -> list[Entry]:
    source = str(path)
    data = read_yaml_mapping(path, "a corpus mapping")
    if not isinstance(data.get("cases"), list):
        raise ConfigError("expected a mapping with a 'cases' list", source=source, field="cases")
    entries = []
    for group in ("cases", "controls"):
        for k, raw in enumerate(data.get(group) or []):
            where = f"{group}[{k}]"
            if not isinstance(raw, dict):
                raise ConfigError("expected a mapping", source=source, field=where)
            unknown = sorted(set(raw) - ENTRY_KEYS)
            if unknown:
                raise ConfigError("unknown key", source=source, field=f"{where}.{unknown[0]}")
            for key in ("id", "seed"):
                if not isinstance(raw.get(key), str):
                    raise ConfigError("expected a string", source=source, field=f"{where}.{key}")
            e = Entry(**raw, control=group == "controls")
            if not e.control and not (isinstance(e.truth, dict) and (set(e.truth) == {"layer", "param"}
                                                                     or e.truth == {"trigger": "input"})):
                raise ConfigError("a case needs truth: {layer, param} or {trigger: input}", source=source,
                                  field=where)
            if not e.control and not (e.fault or e.backends):
                raise ConfigError("a case needs a fault or backends", source=source, field=where)
            if e.control and not (e.fault or e.backends):
                raise ConfigError("a control needs a fault or backends", source=source, field=where)
            entries.append(e)
    return entries


def edited_spec(spec: ModelSpec, entry: Entry) -> ModelSpec:
    new = spec.copy()
    for api, params in entry.edit_api.items():
        for layer in new.layers:
            if layer.api == api:
                layer.params.update(params)
    for name, change in entry.edit.items():
        layer = new.layer(name)
        if "api" in change:  # another API: its own parameters only
            layer.api, layer.params = change["api"], dict(change.get("params", {}))
        else:
            layer.params.update(change.get("params", {}))
    doc = new.to_json()
    for ins in entry.insert:  # a layer after ``after``, feeding what ``after`` fed
        layers = doc["layers"]
        at = next(i for i, lay in enumerate(layers) if lay["name"] == ins["after"])
        for lay in layers:
            lay["inputs"] = [ins["name"] if r == ins["after"] else r for r in lay["inputs"]]
        layers.insert(at + 1, {"name": ins["name"], "api": ins["api"], "params": dict(ins.get("params", {})),
                               "inputs": [ins["after"]]})
        if doc.get("output") == ins["after"]:
            doc["output"] = ins["name"]
    return ModelSpec.from_json(doc)


def edited_inputs(inputs: dict[str, Any], entry: Entry) -> dict[str, Any]:
    """The seed batch scaled (``input_scale``), with ``nan_pixels`` NaN pixels per row."""
    out = {}
    for k, v in inputs.items():
        v = v.copy()
        if v.dtype.kind == "f":
            v = (v * entry.input_scale).astype(v.dtype)
            flat = v.reshape(v.shape[0], -1)
            for j in range(entry.nan_pixels):
                flat[:, (97 * j + 350) % flat.shape[1]] = float("nan")
        out[k] = v
    return out


def provoke(ex: Executor, case: TestCase, labels: list[str]) -> Result | None:
    """The seed batch if it already fails (any failure kind), else the first inconsistency
    the GA finds."""
    result = ex.run(case)
    if any(f.kind in FAILURE_KINDS for f in result.verdict.findings):
        return result
    found: list[Result] = []
    x = {k: v[:1] for k, v in case.inputs.items()}
    for level in ("input", "input-weight"):  # the paper's order: inputs first, then weights too
        cfg = SearchConfig(level=level, fitness="inconsistency", population=12, parents=4, max_iter=40,
                           budget_s=120, stop_at_first=True, input_scale=0.2, weight_scale=0.5, relative_scale=0.2)
        Search(ex, TestCase(case.id, case.spec, case.weights, x), cfg, labels,
               lambda r: found.append(r) or r.case.id, f"{case.id}-{level}").run()
        hit = next((r for r in found if any(f.kind == Kind.INCONSISTENCY for f in r.verdict.findings)), None)
        if hit is not None:
            return hit
    return None


def check_repro(report: Report, path: Path, pool: Pool, out: Path) -> dict[str, Any]:
    """Write the one-layer repro script of the top candidate (``--repro``) and run it
    standalone, in a fresh interpreter outside the repository: does it print REPRODUCED?"""
    t0 = time.perf_counter()
    try:  # a broken repro step is a finding of the benchmark, not the end of it
        with_repro(report, CaseRecord.from_file(path), pool, out)
        if report.repro is None:
            return {"written": False, "note": report.note, "reproduced": False}
        proc = subprocess.run([sys.executable, report.repro], cwd=out, capture_output=True, text=True,
                              timeout=SCRIPT_TIMEOUT_S + 60)
    except Exception as exc:  # noqa: BLE001
        return {"written": report.repro is not None, "note": f"{type(exc).__name__}: {exc}"[:300],
                "reproduced": False, "line": ""}
    line = next((x for x in proc.stdout.splitlines() if "REPRODUCED" in x), "")
    return {"written": True, "script": Path(report.repro).name, "rc": proc.returncode, "line": line[:200],
            "reproduced": proc.returncode == 0 and line.startswith("REPRODUCED"),
            "seconds": round(time.perf_counter() - t0, 1)}


def run_entry(entry: Entry, workdir: Path, cfg: LocalizeConfig, repro: bool = False) -> dict[str, Any]:
    """Provoke, record and localize one corpus entry; ``repro``: on built-in backends,
    also write and run the top candidate's one-layer repro script (:func:`check_repro`)."""
    t0 = time.perf_counter()
    seed = load_seed(entry.seed)
    spec = edited_spec(seed.spec, entry)
    refs = parse_backends(entry.labels)
    row: dict[str, Any] = {"id": entry.id, "seed": entry.seed, "layers": len(spec.layers), "control": entry.control,
                           "backend": entry.faulty_backend}
    with Pool(refs, workdir / "logs") as pool:
        t_start = time.perf_counter()
        pool.start_or_fail(logs=workdir / "logs", source=entry.id)
        row["startup_s"] = round(time.perf_counter() - t_start, 2)
        ex = Executor(pool)
        case = TestCase(entry.id, spec, dict(seed.weights or {}),
                        edited_inputs({k: v[:32] for k, v in seed.inputs.items()}, entry))
        ex.complete_weights(case, seed.weight_seed)
        result = provoke(ex, case, pool.labels) if not entry.control else ex.run(case)
        if entry.control and not result.verdict.failed:
            report = Report(entry.id, "control", pool.labels)
            Localizer(pool, _apis(), cfg).localize_inconsistency(case, pool.labels,
                                                                 {k: v[:4] for k, v in case.inputs.items()}, report)
        else:
            if result is None:
                row.update(found=False, sources=[], seconds=round(time.perf_counter() - t0, 2))
                return row
            path = save_case(workdir / f"{entry.id}.pkl",
                             case_record(result, pool, {"seed": entry.seed}, tie_margin=ex.tie_margin,
                                         tolerances=ex.tolerances.to_json()))
            t_loc = time.perf_counter()
            report = localize_case(path, cfg, pool=pool)
            row["localize_s"] = round(time.perf_counter() - t_loc, 2)
            if repro and all(r.target in BUILTIN_TARGETS for r in refs):
                row["repro"] = check_repro(report, path, pool, workdir / "repro")
    pairs = list(dict.fromkeys((s.layer, s.param) for s in report.sources))
    row.update(found=True, kind=report.kind, sources=[list(p) for p in pairs], cradle=report.cradle,
               trigger=report.trigger.to_json() if report.trigger is not None else None,
               seconds=round(time.perf_counter() - t0, 2),
               top=[{"layer": c.layer, "param": c.param, "score": c.score, "evidence": c.evidence.model_dump(),
                     "named": c.named} for c in report.candidates[:cfg.top_k]])
    if not entry.control:
        row["top1"] = list(pairs[0]) if pairs else ("input" if report.trigger else None)
        if entry.truth == {"trigger": "input"}:
            row["correct"] = report.trigger is not None and not pairs
            row["cradle_hit"] = False
        else:
            ok = {(entry.truth["layer"], p) for p in [entry.truth["param"], *entry.also]}
            row["correct"] = bool(pairs) and pairs[0] in ok
            row["cradle_hit"] = entry.truth["layer"] in report.cradle
    return row


_APIS: dict[str, Any] = {}


def _apis() -> dict[str, Any]:
    if not _APIS:
        from audee.apis import load_api_configs

        _APIS.update(load_api_configs())
    return _APIS


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    cases = [r for r in rows if not r["control"]]
    controls = [r for r in rows if r["control"]]

    def figures(group: list[dict[str, Any]]) -> dict[str, Any]:
        localized = [r for r in group if r.get("sources") or r.get("trigger")]
        correct = [r for r in group if r.get("correct")]
        return {"cases": len(group), "correct": len(correct),
                "top1_precision": round(len(correct) / max(len(localized), 1), 3),
                "top1_recall": round(len(correct) / max(len(group), 1), 3)}

    with_time = [r["localize_s"] + r.get("startup_s", 0.0) for r in cases if "localize_s" in r]
    lenet = [r["localize_s"] + r.get("startup_s", 0.0) for r in cases if "localize_s" in r and r["layers"] <= 12]
    return {
        **figures(cases),
        "layers_mean": round(sum(r["layers"] for r in cases) / max(len(cases), 1), 1),
        "candidates_per_case": round(sum(len(r.get("sources", [])) for r in cases) / max(len(cases), 1), 2),
        "cradle_layer_hits": sum(bool(r.get("cradle_hit")) for r in cases),
        "apis": None,
        "per_backend": {b: figures([r for r in cases if r.get("backend") == b])
                        for b in sorted({r.get("backend", "?") for r in cases})},
        "median_localize_with_startup_s": round(statistics.median(with_time), 1) if with_time else None,
        "median_localize_with_startup_small_s": round(statistics.median(lenet), 1) if lenet else None,
        "by_kind": {k: figures([r for r in cases if r.get("kind") == k])
                    for k in sorted({str(r.get("kind")) for r in cases if r.get("found")})},
        "controls": len(controls),
        "control_false_positives": sum(bool(r.get("sources") or r.get("trigger")) for r in controls),
        "repro_scripts": sum(bool(r.get("repro", {}).get("written")) for r in cases),
        "repro_reproduced": sum(bool(r.get("repro", {}).get("reproduced")) for r in cases),
        "repro_tried": sum("repro" in r for r in cases),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--only", nargs="*", help="case / control ids to run")
    ap.add_argument("--json", help="write the rows and the summary here")
    ap.add_argument("--no-repro", action="store_true",
                    help="skip writing and running the one-layer repro scripts (cases on built-in backends)")
    args = ap.parse_args(argv)
    entries = [e for e in load_corpus(args.corpus) if not args.only or e.id in args.only]
    rows = []
    with tempfile.TemporaryDirectory(prefix="audee-locbench-") as tmp:
        for e in entries:
            row = run_entry(e, Path(tmp) / e.id, LocalizeConfig(), repro=not args.no_repro)
            rows.append(row)
            fp = row["sources"] or row.get("trigger")
            verdict = ("control: " + ("FALSE POSITIVE " + str(row["sources"] or "input") if fp else "nothing, ok")) \
                if e.control else (f"{row.get('kind')}: top-1 {row.get('top1')} "
                                   f"{'correct' if row.get('correct') else 'WRONG'}; {len(row['sources'])} candidate(s)"
                                   if row["found"] else "no failure provoked")
            loc = (f"start {row['startup_s']:>4.1f} s + localize {row['localize_s']:>5.1f} s" if "localize_s" in row
                   else " " * 30)
            rep = row.get("repro")
            if rep is not None:
                rep = ("; repro script: " + (rep.get("line") or rep.get("note") or f"exit {rep.get('rc')}")
                       if rep["written"] else f"; no repro script: {rep['note']}")
            print(f"{e.id:<40} {row['backend']:<10} {row['layers']:>3} layers {row['seconds']:>6.1f} s  {loc}  "
                  f"{verdict}{rep or ''}", flush=True)
            if args.json:  # rows so far, in case the run is cut short
                Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))
    s = summarize(rows)
    s["apis"] = len({lay.api for e in entries if not e.control and e.truth and "layer" in e.truth
                     for lay in [edited_spec(load_seed(e.seed).spec, e).layer(e.truth["layer"])]})
    print(f"\ncases {s['cases']} over {s['apis']} APIs  layers/case {s['layers_mean']}  "
          f"candidates/case {s['candidates_per_case']}  top-1 {s['correct']}/{s['cases']}: "
          f"precision {s['top1_precision']:.0%}  recall {s['top1_recall']:.0%}  "
          f"CRADLE flags the true layer in {s['cradle_layer_hits']}/{s['cases']}  "
          f"controls {s['controls']} with {s['control_false_positives']} false positives")
    for b, f in s["per_backend"].items():
        print(f"  faults on {b:<10} {f['correct']}/{f['cases']} top-1  precision {f['top1_precision']:.0%}  "
              f"recall {f['top1_recall']:.0%}")
    for k, f in s["by_kind"].items():
        print(f"  localized as {k:<21} {f['correct']}/{f['cases']} top-1")
    print(f"one-layer repro scripts (built-in backends): {s['repro_scripts']} written of {s['repro_tried']} tried, "
          f"{s['repro_reproduced']} print REPRODUCED when run standalone")
    print(f"median localization time per case, worker start-up included: {s['median_localize_with_startup_s']} s "
          f"(models of at most 12 layers: {s['median_localize_with_startup_small_s']} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
