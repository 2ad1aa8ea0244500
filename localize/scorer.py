"""Score localization on the ground-truth corpus (``localize/corpus.yaml``).

For each case: run the edited seed on TensorFlow and the faulty backend; if the seed
batch shows no inconsistency, search for one with the GA; write the case file; localize
it; compare the top-1 (layer, parameter) with the truth.  Controls (consistent pairs)
must localize nothing.  Prints the paper's Table 2 columns.

    python -m localize.scorer [--only ID ...] [--corpus localize/corpus.yaml] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.case import Kind, TestCase
from audee.errors import ConfigError
from audee.execute import Executor, Result
from audee.fuzz import case_record
from audee.localize import LocalizeConfig, Localizer, Report
from audee.localize.run import localize_case
from audee.search.engine import Search, SearchConfig
from audee.seeds import load_seed
from audee.spec import ModelSpec
from audee.store import save_case
from audee.yamlio import read_yaml_mapping

CORPUS = Path(__file__).resolve().parent / "corpus.yaml"
ENTRY_KEYS = {"id", "seed", "fault", "edit", "edit_api", "truth", "also", "backends"}


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
    control: bool = False

    @property
    def labels(self) -> list[str]:
        return self.backends or ["tensorflow", self.fault]


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
            if not e.control and (not isinstance(e.truth, dict) or set(e.truth) != {"layer", "param"}
                                  or not e.fault):
                raise ConfigError("a case needs a fault and truth: {layer, param}", source=source, field=where)
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
        layer.api = change.get("api", layer.api)
        layer.params.update(change.get("params", {}))
    return ModelSpec.from_json(new.to_json())


def provoke(ex: Executor, case: TestCase, labels: list[str]) -> Result | None:
    """The seed batch if it already disagrees, else the first failure the GA finds."""
    result = ex.run(case)
    if any(f.kind == Kind.INCONSISTENCY for f in result.verdict.findings):
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


def run_entry(entry: Entry, workdir: Path, cfg: LocalizeConfig) -> dict[str, Any]:
    t0 = time.perf_counter()
    seed = load_seed(entry.seed)
    spec = edited_spec(seed.spec, entry)
    refs = parse_backends(entry.labels)
    row: dict[str, Any] = {"id": entry.id, "seed": entry.seed, "layers": len(spec.layers), "control": entry.control}
    with Pool(refs, workdir / "logs") as pool:
        failed = pool.start()
        if failed:
            raise RuntimeError(f"{entry.id}: backend failed to start: {failed}")
        ex = Executor(pool)
        case = TestCase(entry.id, spec, dict(seed.weights or {}), {k: v[:32] for k, v in seed.inputs.items()})
        ex.complete_weights(case, seed.weight_seed)
        if entry.control:
            report = Report(entry.id, "control", pool.labels)
            Localizer(pool, _apis(), cfg).localize_inconsistency(case, pool.labels,
                                                                 {k: v[:4] for k, v in case.inputs.items()}, report)
        else:
            result = provoke(ex, case, pool.labels)
            if result is None:
                row.update(found=False, sources=[], seconds=time.perf_counter() - t0)
                return row
            path = save_case(workdir / f"{entry.id}.pkl",
                             case_record(result, pool, {"seed": entry.seed}, tie_margin=ex.tie_margin,
                                         tolerances=ex.tolerances.to_json()))
            t_loc = time.perf_counter()
            report = localize_case(path, cfg, pool=pool)
            row["localize_s"] = round(time.perf_counter() - t_loc, 2)
    pairs = list(dict.fromkeys((s.layer, s.param) for s in report.sources))
    row.update(found=True, sources=[list(p) for p in pairs], cradle=report.cradle,
               seconds=round(time.perf_counter() - t0, 2))
    if not entry.control:
        ok = {(entry.truth["layer"], p) for p in [entry.truth["param"], *entry.also]}
        row["top1"] = list(pairs[0]) if pairs else None
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
    localized = [r for r in cases if r.get("sources")]
    correct = [r for r in cases if r.get("correct")]
    controls = [r for r in rows if r["control"]]
    return {
        "cases": len(cases),
        "layers_mean": round(sum(r["layers"] for r in cases) / max(len(cases), 1), 1),
        "candidates_per_case": round(sum(len(r.get("sources", [])) for r in cases) / max(len(cases), 1), 2),
        "top1_precision": round(len(correct) / max(len(localized), 1), 3),
        "top1_recall": round(len(correct) / max(len(cases), 1), 3),
        "cradle_layer_hits": sum(bool(r.get("cradle_hit")) for r in cases),
        "controls": len(controls),
        "control_false_positives": sum(bool(r.get("sources")) for r in controls),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--only", nargs="*", help="case / control ids to run")
    ap.add_argument("--json", help="write the rows and the summary here")
    args = ap.parse_args(argv)
    entries = [e for e in load_corpus(args.corpus) if not args.only or e.id in args.only]
    rows = []
    with tempfile.TemporaryDirectory(prefix="audee-locbench-") as tmp:
        for e in entries:
            row = run_entry(e, Path(tmp) / e.id, LocalizeConfig())
            rows.append(row)
            verdict = ("control: " + ("FALSE POSITIVE " + str(row["sources"]) if row["sources"] else "nothing, ok")) \
                if e.control else (f"top-1 {row.get('top1')} {'correct' if row.get('correct') else 'WRONG'}; "
                                   f"{len(row['sources'])} candidate(s)" if row["found"] else "no failure provoked")
            loc = f"localize {row['localize_s']:>5.1f} s" if "localize_s" in row else " " * 16
            print(f"{e.id:<36} {row['layers']:>4} layers  {row['seconds']:>6.1f} s  {loc}  {verdict}", flush=True)
    s = summarize(rows)
    print(f"\ncases {s['cases']}  layers/case {s['layers_mean']}  candidates/case {s['candidates_per_case']}  "
          f"top-1 precision {s['top1_precision']:.0%}  recall {s['top1_recall']:.0%}  "
          f"CRADLE flags the true layer in {s['cradle_layer_hits']}/{s['cases']}  "
          f"controls {s['controls']} with {s['control_false_positives']} false positives")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
