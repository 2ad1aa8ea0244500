"""The ``audee`` command line (``python -m audee`` is the same).

Every subcommand is a thin layer over a library function; bad input ends with one line
naming the file and the field, and exit code 2.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from audee.errors import AudeeError

EXIT_OK, EXIT_NOT_REPRODUCED, EXIT_BAD_INPUT = 0, 1, 2


def _backends_arg(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--backends", default=default,
                   help="comma-separated backends: tensorflow, torch, jax, onnxruntime, onnxruntime-fed, "
                        "or a plugin class as package.module:ClassName; append @cuda for a GPU device "
                        f"(default: {default})")
    p.add_argument("--device", default="cpu", help="default device for backends without @device (cpu, cuda)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a backend may take on one request before it counts as hung (default 120)")
    p.add_argument("--threads-per-backend", type=int, default=None,
                   help="CPU threads each backend may use (default: the cores shared out among the backends, "
                        "since all of them compute at once; 0: each framework's own default)")


def build_parser() -> argparse.ArgumentParser:
    from audee.backends.registry import DEFAULT_BACKENDS

    ap = argparse.ArgumentParser(prog="audee", description="Differential fuzzing of deep-learning frameworks "
                                 "(Audee, ASE 2020): mutate a seed DNN, run it on several backends, record "
                                 "crashes, NaNs and inconsistencies.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("fuzz", help="network-level mutation of a seed across backends",
                       description="Generate N variants of a seed DNN by redrawing layer parameters from the API "
                                   "configs, run each on every backend with a batch of seed inputs, and record "
                                   "every test case in OUT/results.jsonl and every failing one in OUT/cases/.")
    p.add_argument("--seed", default="lenet5",
                   help="a seed name (see `audee seeds`), a seed directory, a spec .json, or a .keras model")
    p.add_argument("--inputs", help="your own inputs: an .npz with one array per model input (batch first)")
    _backends_arg(p, ",".join(DEFAULT_BACKENDS))
    p.add_argument("--variants", type=int, default=None,
                   help="number of network-level variants (default 50; 0 when --level is given)")
    p.add_argument("--out", required=True, help="output directory (rerun to resume)")
    p.add_argument("--rng", type=int, default=0, help="random seed: the same value gives the same variants")
    p.add_argument("--batch", type=int, default=32, help="seed inputs per test case (default 32)")
    p.add_argument("--layer-rate", type=float, default=0.5, help="probability a layer's parameters are redrawn")
    p.add_argument("--max-layers", type=int, default=3,
                   help="at most this many layers change per variant (0: no cap; default 3)")
    p.add_argument("--invalid-prob", type=float, default=0.1,
                   help="probability a variant tests one crafty invalid value (default 0.1)")
    p.add_argument("--tie-margin", type=float, default=1e-5,
                   help="label flips where a backend's top-two outputs are closer than this count as "
                        "floating-point ties, not inconsistencies (0: the paper's plain definition)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = p.add_argument_group("search (input / weight level, the paper's Algorithm 1)",
                             "Given --level, a GA (or random search) evolves the seed input and/or weights of the "
                             "seed, or of the first K variants without failures (--ga-on-consistent K).")
    g.add_argument("--level", choices=["input", "weight", "input-weight"], help="what the search mutates")
    g.add_argument("--fitness", choices=["inconsistency", "nan"], default=None,
                   help="inconsistency: logits distance between backends (largest pair); nan: max-min spread "
                        "of the logits on --nan-backend (default inconsistency)")
    g.add_argument("--search", default=None, help="ga, random, or ga,random to compare both on equal budgets")
    g.add_argument("--budget", default=None, help="wall-clock budget per search run, e.g. 300s, 5m (default 60s)")
    g.add_argument("--ga-on-consistent", type=int, default=None, metavar="K",
                   help="search the first K variants that showed no failure (default 1)")
    g.add_argument("--stop-at-first", action="store_true", default=None, help="stop a search at its first failure")
    g.add_argument("--search-config", help="YAML file with search settings (any of the options below)")
    g.add_argument("--population", type=int, help="population size n (default 20)")
    g.add_argument("--parents", type=int, help="top m kept each generation (default 6)")
    g.add_argument("--crossover-rate", type=float, help="r1: share of genes from the first parent (default 0.5)")
    g.add_argument("--mutation-rate", type=float, help="r2: probability a child gets Cauchy noise (default 0.8)")
    g.add_argument("--input-scale", type=float, help="Cauchy scale as a share of the input range (default 0.1)")
    g.add_argument("--weight-scale", type=float, help="Cauchy scale as a share of each weight's std (default 0.1)")
    g.add_argument("--relative-scale", type=float,
                   help="extra Cauchy scale proportional to |gene|, letting values grow geometrically (default 0)")
    g.add_argument("--max-iter", type=int, help="maximum generations (default 50)")
    g.add_argument("--layer", help="layer the fitness reads (default: the logits layer)")
    g.add_argument("--nan-backend", help="backend the NaN fitness reads (default: the first)")
    g.add_argument("--input-index", type=int, help="seed input to start from (default: one per target)")

    p = sub.add_parser("reproduce", help="re-run a case file and say whether its verdict holds",
                       description="Exit 0 if every recorded failure shows again, 1 if not, 2 on bad input.")
    p.add_argument("case", help="a case file written by audee (OUT/cases/ID.pkl)")
    p.add_argument("--backends", help="override the case's backends")
    p.add_argument("--device", default="cpu")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--json", action="store_true", help="print the new verdict as JSON")

    p = sub.add_parser("localize", help="pinpoint the layer and parameter behind a failing case",
                       description="Algorithm 2 of the paper: per-layer distances and change rates, then the "
                                   "localize-fix loop naming (layer, parameter) pairs. Exit 0 when the case "
                                   "reproduces and was localized, 1 when it no longer reproduces, 2 on bad input, "
                                   "3 when it reproduces but nothing was localized.")
    p.add_argument("case", help="a case file written by audee")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--t1", type=float, default=1000.0, help="inconsistency threshold on change rates (default 1000)")
    p.add_argument("--t2", type=float, default=2.0, help="consistency threshold for a replaced parameter (default 2)")
    p.add_argument("--pair", help="backend pair to localize, e.g. tensorflow,torch (default: the first inconsistent)")
    p.add_argument("--backends", help="override the case's backends")
    p.add_argument("--device", default="cpu")
    p.add_argument("--timeout", type=float, default=120.0)

    p = sub.add_parser("campaign", help="run a campaign config (or one shard of it), resumably",
                       description="Expand CONFIG into units (seed x backend set x rng), run the shard's units "
                                   "into OUT/units/<unit>/ and keep OUT/status/ current. Rerun to resume. Inside "
                                   "a SLURM job array the shard comes from SLURM_ARRAY_TASK_ID/COUNT.")
    p.add_argument("config", help="a campaign YAML file (see experiments/)")
    p.add_argument("--out", required=True, help="campaign directory, shared by all shards")
    p.add_argument("--shard", help="I/N: run shard I of N (default: from SLURM, else the whole campaign)")
    p.add_argument("--device", default="cpu", help="device for backends without @device (cpu, cuda)")
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser("report", help="merge a campaign (or fuzz) directory into tables and plots",
                       description="Read every unit under DIR/units (all shards), deduplicate inconsistencies by "
                                   "the paper's criteria, and write Markdown/CSV tables, PNG plots and index.md.")
    p.add_argument("dir", help="a campaign directory (or one `audee fuzz` output directory)")
    p.add_argument("--out", help="where to write the report (default: DIR/report)")

    p = sub.add_parser("backends", help="list backends, their framework versions and whether they work here",
                       description="Start each backend's worker and report its versions (takes ~15 s: "
                                   "each framework is imported).")
    _backends_arg(p, ",".join(DEFAULT_BACKENDS) + ",onnxruntime-fed")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("seeds", help="list the seed DNNs and their inputs")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("apis", help="list the layer APIs that have a parameter config")
    p.add_argument("--json", action="store_true")
    return ap


def cmd_fuzz(args: argparse.Namespace) -> int:
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, fuzz, summarize
    from audee.seeds import check_inputs, load_inputs

    refs = parse_backends(args.backends, args.device)
    seed = _load_seed(args.seed, refs, Path(args.out))
    inputs = seed.inputs
    if args.inputs:
        inputs, _ = load_inputs(args.inputs)
        inputs = check_inputs(seed.spec, inputs, args.inputs)
    if not inputs:
        raise AudeeError(f"seed {args.seed} ships no inputs: give them with --inputs file.npz "
                         f"(arrays named {', '.join(seed.spec.input_names)}, batch first)", field="--inputs")
    plan = _search_plan(args, refs)
    if args.variants is None:
        args.variants = 0 if plan is not None else 50
    if args.variants < 0 or args.batch < 1:
        raise AudeeError("must be >= 0 (variants) and >= 1 (batch)", field="--variants/--batch")
    cfg = FuzzConfig(refs, Path(args.out), args.variants, args.rng, args.batch, args.layer_rate, args.max_layers,
                     args.invalid_prob, timeout=args.timeout, tie_margin=args.tie_margin,
                     threads=args.threads_per_backend)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        total = args.variants + 1 + (plan.on_consistent * len(plan.searches) if plan else 0)
        bar = tqdm(total=total, desc=f"fuzz {seed.name}", unit="step", file=sys.stderr)
    try:
        stats = fuzz(seed, inputs, cfg, progress=bar.update if bar is not None else None, plan=plan)
    finally:
        if bar is not None:
            bar.close()
    summary = summarize(Path(args.out))
    Path(args.out, "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"audee fuzz {seed.name} on {', '.join(r.label for r in refs)}: "
          f"{stats.run} test cases run now, {stats.skipped} resumed from {args.out}")
    _print_summary(summary)
    for r in stats.searches:
        first = f"{r['first_failure_s']:.1f} s" if r["first_failure_s"] is not None else "none"
        print(f"  search {r['search']:<6} {r['target']:<18} {r['level']}/{r['fitness']}: {r['generations']} "
              f"generations, {r['evaluations']} evaluations ({r['evals_per_s']:.1f}/s), failures "
              f"{len(r['failures'])}, first after {first}, best fitness {r['best_fitness']:.4g}")
    print(f"results: {Path(args.out) / 'results.jsonl'}   cases: {Path(args.out) / 'cases'}")
    return EXIT_OK


def _search_plan(args: argparse.Namespace, refs: list) -> Any:
    """A SearchPlan when --level (or a search config) asks for a search, else None."""
    from audee.search.config import load_search_config, make_config, parse_duration
    from audee.search.runner import SearchPlan

    file_values = load_search_config(args.search_config) if args.search_config else {}
    if args.level is None and "level" not in file_values:
        for flag in ("fitness", "search", "budget", "ga_on_consistent", "population", "max_iter"):
            if getattr(args, flag) is not None:
                raise AudeeError(f"--{flag.replace('_', '-')} needs --level (input, weight or input-weight)",
                                 field="--level")
        return None
    cli = {"level": args.level, "fitness": args.fitness, "population": args.population, "parents": args.parents,
           "crossover_rate": args.crossover_rate, "mutation_rate": args.mutation_rate,
           "input_scale": args.input_scale, "weight_scale": args.weight_scale, "max_iter": args.max_iter,
           "relative_scale": args.relative_scale,
           "layer": args.layer, "nan_backend": args.nan_backend, "stop_at_first": args.stop_at_first,
           "rng": args.rng, "budget_s": parse_duration(args.budget) if args.budget is not None else None}
    cfg = make_config(file_values, cli, args.search_config or "command line")
    labels = [r.label for r in refs]
    if cfg.fitness == "inconsistency" and len(labels) < 2:
        raise AudeeError("the inconsistency fitness needs two or more backends (or use --fitness nan)",
                         field="--backends")
    if cfg.nan_backend is not None and cfg.nan_backend not in labels:
        raise AudeeError(f"{cfg.nan_backend!r} is not among --backends", field="--nan-backend")
    searches = [s.strip() for s in (args.search or "ga").split(",") if s.strip()]
    if not searches or any(s not in ("ga", "random") for s in searches):
        raise AudeeError(f"expected ga, random or ga,random, got {args.search!r}", field="--search")
    return SearchPlan(cfg, searches, args.ga_on_consistent or 1, args.input_index)


def _print_summary(s: dict[str, Any]) -> None:
    print(f"  test cases           {s['test_cases']}  (failing: {s['failing']})")
    print(f"  crashes   hard       {s['hard_crash']}" +
          (f"  ({', '.join(f'{k}: {v}' for k, v in s['hard_crash_detail'].items())})" if s['hard_crash_detail'] else ""))
    print(f"            divergent  {s['divergent_acceptance']}  (one backend accepts what another rejects)")
    print(f"            rejected   {s['consistent_rejection']}  (every backend refuses: expected)")
    print(f"  NaN/Inf              {s['nan']}  (strong, one backend finite: {s['nan_strong']})")
    print(f"  inconsistencies      {s['inconsistency']}")
    for pair, n in sorted(s["inconsistency_by_pair"].items()):
        print(f"    {pair.replace('|', ' vs '):<30} {n}")
    print(f"  mean time per case   {s['mean_seconds_per_case']:.3f} s")


def _load_seed(name: str, refs: list, out: Path):
    from audee.seeds import load_seed

    if name.endswith(".keras"):
        return _import_keras_seed(name, refs, out)
    return load_seed(name)


def _import_keras_seed(path: str, refs: list, out: Path):
    """A user's .keras model: converted to a spec inside a TensorFlow worker."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.seeds import Seed
    from audee.spec import ModelSpec

    if not Path(path).is_file():
        raise AudeeError("no such file", source=path)
    with Pool(parse_backends("tensorflow"), out / "logs") as pool:
        failed = pool.start()
        if failed:
            raise AudeeError(f"cannot start a tensorflow worker to read it: {failed['tensorflow'].message}", source=path)
        try:
            got = pool.call("tensorflow", "import_keras", path=str(Path(path).resolve()))
        except RuntimeError as exc:
            raise AudeeError(str(exc).splitlines()[0], source=path) from None
    if "refused" in got:
        raise AudeeError(got["refused"])
    spec = ModelSpec.from_json(got["spec"], source=path)
    return Seed(name=spec.name, spec=spec, inputs={}, labels=None, weights=got["weights"], weight_seed=0,
                description=f"imported from {path}", data="user", source=path)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from audee.backends.registry import parse_backends
    from audee.reproduce import reproduce

    refs = parse_backends(args.backends, args.device) if args.backends else None
    with tempfile.TemporaryDirectory(prefix="audee-repro-") as tmp:
        rep = reproduce(args.case, backends=refs, log_dir=Path(tmp), timeout=args.timeout)
    if args.json:
        print(json.dumps({"id": rep.record["id"], "holds": rep.holds, "original": rep.original.to_json(),
                          "now": rep.result.verdict.to_json()}, default=str, indent=1))
    else:
        print(f"case {rep.record['id']} ({args.case})")
        print(f"  recorded: {_describe(rep.original)}")
        print(f"  now:      {_describe(rep.result.verdict)}")
        print("  verdict holds" if rep.holds else "  verdict does NOT hold: the case no longer reproduces")
    return EXIT_OK if rep.holds else EXIT_NOT_REPRODUCED


def _describe(v: Any) -> str:
    if not v.findings:
        return "pass (all backends agree)"
    return "; ".join(f"{f.kind} [{', '.join(f.backends)}]" for f in v.findings)


EXIT_NOT_LOCALIZED = 3


def cmd_campaign(args: argparse.Namespace) -> int:
    from audee.campaign import load_campaign, run_shard, shard_of

    campaign = load_campaign(args.config)
    index, count = shard_of(args.shard)
    units = campaign.shard(index, count)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(units), desc=f"{campaign.name} shard {index}/{count}", unit="unit", file=sys.stderr)
    try:
        status = run_shard(campaign, Path(args.out), index, count, bar.update if bar is not None else None,
                           device=args.device)
    finally:
        if bar is not None:
            bar.close()
    print(f"campaign {campaign.name} shard {index}/{count}: {status['done']}/{status['units']} units done "
          f"in {args.out}")
    return EXIT_OK


def cmd_localize(args: argparse.Namespace) -> int:
    from audee.backends.registry import parse_backends
    from audee.localize import LocalizeConfig
    from audee.localize.run import localize_case, render

    refs = parse_backends(args.backends, args.device) if args.backends else None
    pair = [p.strip() for p in args.pair.split(",")] if args.pair else None
    report = localize_case(args.case, LocalizeConfig(t1=args.t1, t2=args.t2), backends=refs, pair=pair,
                           timeout=args.timeout)
    print(json.dumps(report.to_json(), indent=1) if args.json else render(report))
    if not report.reproduced:
        return EXIT_NOT_REPRODUCED
    return EXIT_OK if report.sources else EXIT_NOT_LOCALIZED


def cmd_report(args: argparse.Namespace) -> int:
    from audee.report import load_campaign_dir, write_report

    data = load_campaign_dir(args.dir)
    written = write_report(data, Path(args.out or Path(args.dir) / "report"))
    print(f"report: {written[-1]} ({len(written)} files)")
    return EXIT_OK


def cmd_backends(args: argparse.Namespace) -> int:
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    refs = parse_backends(args.backends, args.device)
    with tempfile.TemporaryDirectory(prefix="audee-backends-") as tmp, Pool(refs, Path(tmp)) as pool:
        failed = pool.start()
        rows = []
        for label, w in pool.workers.items():
            f = failed.get(label)
            rows.append({"backend": label, "class": w.ref.target, "device": w.ref.device, "usable": f is None,
                         "versions": w.versions, "error": (f.message.strip().splitlines() or [""])[-1] if f else ""})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            state = "usable" if r["usable"] else f"NOT usable: {r['error']}"
            vers = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
            print(f"{r['backend']:<16} {r['device']:<5} {state:<8}  {vers}")
    return EXIT_OK if all(r["usable"] for r in rows) else EXIT_NOT_REPRODUCED


def cmd_seeds(args: argparse.Namespace) -> int:
    from audee.seeds import list_seeds, load_seed

    rows = []
    for name in list_seeds():
        s = load_seed(name)
        n = int(next(iter(s.inputs.values())).shape[0]) if s.inputs else 0
        rows.append({"seed": name, "layers": len(s.spec.layers),
                     "inputs": ", ".join(f"{i.name} {list(i.shape)} {i.dtype}" for i in s.spec.inputs),
                     "seed_inputs": n, "data": s.data, "weights": "trained" if s.weights else "init",
                     "description": s.description})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['seed']:<12} {r['layers']:>3} layers  {r['seed_inputs']:>4} inputs  {r['weights']:<7}  "
                  f"{r['inputs']:<28} {r['description']}")
    return EXIT_OK


def cmd_apis(args: argparse.Namespace) -> int:
    from audee.apis import load_api_configs

    apis = load_api_configs()
    rows = [{"api": name, "category": c.category, "params": list(c.params)} for name, c in sorted(apis.items())]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['api']:<24} {r['category']:<14} {', '.join(r['params'])}")
        print(f"{len(rows)} APIs")
    return EXIT_OK


COMMANDS = {"fuzz": cmd_fuzz, "reproduce": cmd_reproduce, "localize": cmd_localize, "campaign": cmd_campaign, "report": cmd_report, "backends": cmd_backends, "seeds": cmd_seeds,
            "apis": cmd_apis}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AudeeError as exc:
        print(f"audee: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("audee: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
