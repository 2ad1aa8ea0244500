"""The ``audee`` command line (``python -m audee`` is the same).

Every subcommand is a thin layer over a library function; bad input ends with one line
naming the file and the field, and exit code 2.  Exit codes: :mod:`audee.core.exitcodes`.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from audee import __version__
from audee.core.errors import AudeeError, BackendUnavailable
from audee.core.exitcodes import ExitCode, describe
from audee.levels import parse_targets, target_entries
from audee.settings import (PROFILES, FuzzSettings, LocalizeSettings, SearchSettings, ShardSettings,
                            add_model_options, apply_profile, check_environment, given_options, validate_settings)
from audee.store.runstore import RunStore

if TYPE_CHECKING:
    from audee.triage import RootCause

log = logging.getLogger(__name__)


def _precision_arg(p: argparse.ArgumentParser) -> None:
    from audee.backends.registry import PRECISIONS

    p.add_argument("--gpu-precision", choices=PRECISIONS, default=None,
                   help="precision mode of GPU backends named without one (@cuda): full (IEEE float32, the "
                        "default) or tf32 "
                        "(the GPU's TF32 matmuls and convolutions, judged with the tf32 tolerances)")


def _env_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", action="append", default=[], metavar="NAME=PYTHON",
                   help="an environment a backend may run in: NAME=/path/to/python (repeatable); a backend "
                        "named NAME@... (torch@prev) runs its worker under that interpreter, audee itself "
                        "from this checkout; torch and torch@prev are a version pair, judged as a regression "
                        "pair (docs/backends.md, Environments; `make env-prev` builds .venv-prev)")


def _envs(args: argparse.Namespace) -> dict[str, str]:
    """The environments ``--env`` declares (checked: a bad one is one line, exit 2)."""
    from audee.backends.registry import parse_envs

    return parse_envs(getattr(args, "env", None) or [])


def _backend_refs(args: argparse.Namespace) -> list[Any] | None:
    """A command's backends: ``--backends`` in the ``--env`` environments, else None (a case
    file's own), or, when ``--env`` is given, the case file's with their interpreters."""
    from audee.backends.registry import parse_backends
    from audee.store.caserecord import CaseRecord

    envs = _envs(args)
    if args.backends:
        return parse_backends(args.backends, args.device, args.gpu_precision, envs)
    if not envs:
        return None  # the case's recorded backends; one in an environment is refused there in one line
    return CaseRecord.from_file(args.case).backend_refs(args.allow_plugin, envs)


def _backends_arg(p: argparse.ArgumentParser, default: str, settings: bool = True) -> None:
    from audee.backends.registry import BUILTIN

    p.add_argument("--backends", default=default,
                   help=f"comma-separated backends: {', '.join(BUILTIN)}, "
                        "or a plugin class as package.module:ClassName; append @cuda for a GPU device, "
                        "@cuda:tf32 for a GPU in TF32 mode, @NAME to run it in the environment NAME "
                        "(--env; torch@prev, torch@prev@cuda) "
                        f"(default: {default})")
    p.add_argument("--device", default="cpu", help="default device for backends without @device (cpu, cuda)")
    _precision_arg(p)
    _env_arg(p)
    if settings:  # `audee fuzz` adds these with the rest of FuzzSettings
        add_model_options(p, FuzzSettings, only=["timeout", "threads"])


def build_parser() -> argparse.ArgumentParser:
    from audee.backends.registry import BUILTIN, DEFAULT_BACKENDS
    from audee.repro.recheck import TIMEOUT_S as RECHECK_TIMEOUT_S, TRIES as RECHECK_TRIES

    ap = argparse.ArgumentParser(prog="audee", description="Differential fuzzing of deep-learning frameworks "
                                 "(Audee, ASE 2020): mutate a seed DNN, run it on several backends, record "
                                 "crashes, NaNs and inconsistencies.",
                                 epilog=describe() + ".")
    ap.add_argument("--version", action="version", version=f"audee {__version__}")
    loud = ap.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", action="count", default=0,
                      help="log on stderr: -v info (runs, units, searches, workers), -vv debug (every verdict)")
    loud.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("fuzz", help="network-level mutation of a seed across backends",
                       description="Generate N variants of a seed DNN by redrawing layer parameters from the API "
                                   "configs, run each on every backend with a batch of seed inputs, and record "
                                   "every test case in OUT/results.jsonl and every failing one in OUT/cases/; "
                                   "the log goes to OUT/logs/audee.log. "
                                   + describe(ExitCode.OK, ExitCode.BAD_INPUT, ExitCode.BACKEND_UNAVAILABLE,
                                              ExitCode.INTERRUPTED) + ".")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--seed", default=None,
                      help="a seed name (see `audee seeds`), a seed directory, a spec .json, or a .keras model "
                           "(default: lenet5)")
    for entry in target_entries():  # a level run over named targets: its flag is its registry entry's
        what.add_argument(entry.flag, default=None, metavar="NAME[,NAME...]|all", help=entry.flag_help)
    p.add_argument("--inputs", help="your own inputs: an .npz with one array per model input (batch first); "
                                    "default: the seed's, an inputs.npz beside a user's model, else generated")
    _backends_arg(p, ",".join(DEFAULT_BACKENDS), settings=False)
    p.add_argument("--out", required=True, help="output directory (rerun to resume)")
    p.add_argument("--profile", choices=list(PROFILES), default=None,
                   help="a named set of the settings below (smoke: a few tiny cases; paper: the Audee paper's; "
                        "ci: the test suite's; audee.settings.PROFILES); a flag given wins over the profile")
    # every fuzz setting's flag, type, help and default: audee.settings.FuzzSettings (as campaign units)
    add_model_options(p, FuzzSettings)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _known_issues_args(p)
    g = p.add_argument_group("search (input / weight level, the paper's Algorithm 1)",
                             "Given --level, a GA (or random search) evolves the seed input and/or weights of the "
                             "seed, or of the first K variants without failures (--ga-on-consistent K). The "
                             "search runs until --budget is spent (or --max-iter generations, when given).")
    g.add_argument("--search", default=None, help="ga, random, or ga,random to compare both on equal budgets")
    g.add_argument("--ga-on-consistent", type=int, default=None, metavar="K",
                   help="search the first K variants that showed no failure (default 1)")
    g.add_argument("--search-config", help="YAML file with search settings (any of the options below)")
    g.add_argument("--input-index", type=int, help="seed input to start from (default: one per target)")
    # the search settings: audee.settings.SearchSettings (the rng is --rng; --search above is the plan's)
    add_model_options(g, SearchSettings, exclude=("search", "rng"))

    p = sub.add_parser("reproduce", help="re-run a case file and say whether its verdict holds",
                       description="Re-run a case on its backends: exit 0 if every recorded failure shows again. "
                                   + describe(ExitCode.OK, ExitCode.NOT_REPRODUCED, ExitCode.BAD_INPUT,
                                              ExitCode.BACKEND_UNAVAILABLE) + ".")
    p.add_argument("case", help="a case file written by audee (OUT/cases/ID.pkl)")
    p.add_argument("--backends", help="override the case's backends")
    p.add_argument("--allow-plugin", action="append", default=[], metavar="MODULE:CLASS",
                   help="run this plugin backend if the case names it (repeatable); a case file cannot "
                        "choose code to run, so plugins it names are refused unless allowed here")
    p.add_argument("--device", default="cpu")
    _precision_arg(p)
    _env_arg(p)
    add_model_options(p, FuzzSettings, only=["timeout"])
    p.add_argument("--json", action="store_true", help="print the new verdict as JSON")

    p = sub.add_parser("localize", help="pinpoint the layer and parameter behind a failing case",
                       description="Algorithm 2 of the paper: per-layer distances and change rates, then the "
                                   "localize-fix loop naming (layer, parameter) pairs. Exit 0 when the case "
                                   "reproduces and was localized. "
                                   + describe(ExitCode.OK, ExitCode.NOT_REPRODUCED, ExitCode.BAD_INPUT,
                                              ExitCode.NOT_LOCALIZED, ExitCode.BACKEND_UNAVAILABLE) + ".")
    p.add_argument("case", help="a case file written by audee")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    add_model_options(p, LocalizeSettings, exclude=("max_cases", "consistent"))  # audee.settings
    p.add_argument("--pair", help="backend pair to localize, e.g. tensorflow,torch (default: the first inconsistent)")
    p.add_argument("--repro", metavar="DIR", help="also write the one-layer repro script of the top candidate's "
                                                  "layer into DIR (built-in backends only)")
    p.add_argument("--backends", help="override the case's backends")
    p.add_argument("--allow-plugin", action="append", default=[], metavar="MODULE:CLASS",
                   help="run this plugin backend if the case names it (repeatable); a case file cannot "
                        "choose code to run, so plugins it names are refused unless allowed here")
    p.add_argument("--device", default="cpu")
    _precision_arg(p)
    _env_arg(p)
    add_model_options(p, FuzzSettings, only=["timeout"])

    p = sub.add_parser("repro", help="write a standalone repro script for a case, and run it once",
                       description="Write OUT/<signature>.py and .npz: plain Python (numpy and the frameworks, no "
                                   "audee) that builds the smallest model still failing (the layer alone when one "
                                   "is known, else the variant), runs each backend in its own process and exits 0 "
                                   "if the failure reproduces. Then run it once in a fresh process. Plugin "
                                   "backends cannot be in a script: a failure that involves one is refused. "
                                   + describe(ExitCode.OK, ExitCode.NOT_REPRODUCED, ExitCode.BAD_INPUT,
                                              ExitCode.BACKEND_UNAVAILABLE) + " (also: the script finds its "
                                   "environment broken).")
    p.add_argument("case", help="a case file written by audee (OUT/cases/ID.pkl)")
    p.add_argument("--out", help="directory for the script and its .npz (default: OUT/repro/ beside OUT/cases/)")
    p.add_argument("--name", help="file name without suffix (default: the bug signature's slug)")
    p.add_argument("--layer", help="reduce the model to this layer alone (default: the layer the finding names)")
    p.add_argument("--model", choices=("auto", "one-layer", "variant"), default="auto",
                   help="auto: the layer alone when it still fails, else the whole variant (default: auto)")
    p.add_argument("--finding", type=int, metavar="I", help="which finding of the case (default: the first failure)")
    p.add_argument("--backends", help="override the case's backends (audee's workers compute the one-layer "
                                      "input and check the model still fails)")
    p.add_argument("--allow-plugin", action="append", default=[], metavar="MODULE:CLASS",
                   help="accepted for symmetry with reproduce; a script cannot run plugins, so a failure "
                        "that involves one is refused")
    p.add_argument("--device", default="cpu")
    _precision_arg(p)
    _env_arg(p)
    p.add_argument("--no-run", action="store_true", help="write the script, do not run it")

    p = sub.add_parser("recheck", help="run every standalone script of a folder again, each alone: which still "
                                       "reproduce, which are fixed, which are broken",
                       description="Run each standalone script of PATH (a run directory's repro/ scripts, a folder "
                                   "such as findings/, or scripts named) in a fresh process of --python, in a "
                                   "scratch directory, with a timeout; a findings/ script once per Keras backend "
                                   "its docstring names (KERAS_BACKEND=...). Its printed REPRODUCED / NOT "
                                   "REPRODUCED line decides (reproduces / fixed), the exit code cross-checks it; a "
                                   "script that errors, times out or prints neither is broken. Writes "
                                   "recheck.md, .csv and .json (each framework's version in the interpreter, the "
                                   "last line of each script), rewritten after every script; rerun to resume. Exit "
                                   "0 when every script reproduces, 1 when one is fixed and none broken, 7 when one "
                                   "is broken. "
                                   + describe(ExitCode.OK, ExitCode.NOT_REPRODUCED, ExitCode.BAD_INPUT,
                                              ExitCode.SCRIPTS_BROKEN) + ".")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a run directory (its repro/ scripts), a folder of scripts (its own *.py but the make_*.py "
                        "and _*.py helpers), or a .py script")
    p.add_argument("--python", metavar="PATH",
                   help="the interpreter to run the scripts in, e.g. another virtual environment's bin/python "
                        "(default: the one running audee)")
    p.add_argument("--out", help="where to write the table (default: RUN/recheck/ when PATH is one run directory; "
                                 "needed for any other folder)")
    p.add_argument("--timeout", type=float, default=RECHECK_TIMEOUT_S, metavar="S",
                   help=f"seconds one run of one script may take; its processes are killed then and it is broken "
                        f"(default: {RECHECK_TIMEOUT_S:g})")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="scripts run at a time (default: 1, each alone on the machine)")
    p.add_argument("--tries", type=int, default=RECHECK_TRIES, metavar="N",
                   help=f"runs of a script that prints NOT REPRODUCED before it is fixed: a bug may show in some "
                        f"processes only (default: {RECHECK_TRIES})")

    p = sub.add_parser("bisect", help="the first environment (oldest first) whose release computes a case "
                                      "differently from the oldest",
                       description="Run CASE on one backend in each environment of an ordered list (--env "
                                   "NAME=PYTHON repeated, oldest first, or the envs: of a campaign or settings "
                                   "file, in its order), every environment in its own worker at once, and judge "
                                   "each against the oldest as a version pair (a regression finding of the pair, "
                                   "whatever oracle saw it). Linear, not binary: every environment runs once and "
                                   "the first that differs is printed with its versions; a later one that agrees "
                                   "with the oldest again is said (not monotone). Exit 0 when one differs, 8 when "
                                   "none does. "
                                   + describe(ExitCode.OK, ExitCode.BAD_INPUT, ExitCode.BACKEND_UNAVAILABLE,
                                              ExitCode.NO_CHANGE) + ".")
    p.add_argument("case", help="a case file written by audee (OUT/cases/ID.pkl)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=PYTHON",
                   help="an environment of the list, oldest first (repeatable; at least two in all)")
    p.add_argument("--envs-from", metavar="FILE",
                   help="a campaign or settings YAML file whose envs: mapping (name: /path/to/python, oldest "
                        "first) is the list, instead of --env")
    p.add_argument("--backend", help="the backend to run in each environment, e.g. torch (default: the one "
                                     "backend the case ran on)")
    add_model_options(p, FuzzSettings, only=["timeout"])
    p.add_argument("--json", action="store_true", help="print the answer as JSON")

    p = sub.add_parser("campaign", help="run a campaign config (or one shard of it), resumably",
                       description="Expand CONFIG into units (seed x backend set x rng), run the shard's units "
                                   "into OUT/units/<unit>/ and keep OUT/status/ current. Rerun to resume. Inside "
                                   "a SLURM job array the shard is SLURM_ARRAY_TASK_ID (with --shards N, or the array's layout, "
                                   "recorded in OUT/shards.json so a resubmitted task runs the same units). The "
                                   "shard's log goes to OUT/logs/shard-I-of-N/audee.log. "
                                   + describe(ExitCode.OK, ExitCode.BAD_INPUT, ExitCode.BACKEND_UNAVAILABLE,
                                              ExitCode.UNIT_ERRORS, ExitCode.INTERRUPTED) + ".")
    p.add_argument("config", help="a campaign YAML file (see experiments/)")
    p.add_argument("--out", required=True, help="campaign directory, shared by all shards")
    p.add_argument("--shard", help="I/N: run shard I of N (default: from SLURM, else the whole campaign)")
    p.add_argument("--shards", type=int, metavar="N",
                   help="in a SLURM job array: N shards, this task runs shard SLURM_ARRAY_TASK_ID (0 <= id < N); "
                        "without it the layout comes from the array on first use, recorded in OUT/shards.json")
    p.add_argument("--list-units", action="store_true",
                   help="print the ids of the units this task (or --shard I/N) would run, and exit")
    p.add_argument("--device", default="cpu", help="device for backends without @device (cpu, cuda)")
    _precision_arg(p)
    add_model_options(p, ShardSettings)  # --parallel-units, --shards-per-gpu (a campaign file's top level too)
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser("report", help="merge a campaign (or fuzz) directory into tables and plots",
                       description="Read every unit under DIR/units (all shards), deduplicate inconsistencies by "
                                   "the paper's criteria, and write Markdown/CSV tables, PNG plots and index.md.")
    p.add_argument("dir", help="a campaign directory (or one `audee fuzz` output directory)")
    p.add_argument("--out", help="where to write the report (default: DIR/report)")
    p.add_argument("--resign", action="store_true",
                   help="make each failing case's bug signatures again from its case file with this audee's rules "
                        "(a run recorded before a classification rule changed counts as today's audee would)")
    p.add_argument("--recheck-new", action="store_true",
                   help="run each new bug's standalone script again, alone, before counting it: one that does not "
                        "print REPRODUCED is said apart and gets no bug report (results kept in REPORT/alone.json; "
                        "a rerun runs only the rest)")
    p.add_argument("--python", help="with --recheck-new: the interpreter to run the scripts (default: this one)")
    _known_issues_args(p)

    p = sub.add_parser("backends", help="list backends, their framework versions and whether they work here",
                       description="Start each backend's worker and report its versions (takes ~15 s "
                                   "a backend: each framework is imported; by default every built-in one). "
                                   + describe(ExitCode.OK, ExitCode.BAD_INPUT, ExitCode.BACKEND_UNAVAILABLE)
                                   + " (some backend is not usable here).")
    _backends_arg(p, ",".join(BUILTIN))
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("seeds", help="list the seed DNNs and their inputs")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("apis", help="list the layer APIs that have a parameter config")
    p.add_argument("--json", action="store_true")
    p.add_argument("--coverage", action="store_true",
                   help="compare each config with its Keras constructor: every parameter configured, skipped "
                        "(with the config's reason), exempt (docs/apis.md) or missing; then the Keras layers with "
                        "no config and no exclusion (exit 5 if any gap)")
    p.add_argument("--seed", help="with --coverage: only this seed's layers (a name, spec .json, directory or "
                                  ".keras): which are mutated and which run unmutated, having no config")
    p.add_argument("--ops", action="store_true",
                   help="the keras.ops configs (api_configs/ops/, docs/ops.md) instead of the layers'; with "
                        "--coverage every keras.ops function is configured or excluded with a reason")
    return ap


def _known_issues_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--known-issues", action="append", default=[], metavar="FILE",
                   help="a YAML list of triaged bugs (repeatable; schema: docs/oracles.md): matching bugs are "
                        "reported with the entry's status (found before, known upstream, fixed upstream), id and "
                        "link, not new. Adds to the list audee ships (audee/data/known_issues.yaml)")
    p.add_argument("--no-shipped-known-issues", action="store_true",
                   help="leave the shipped known-issues list out (only --known-issues files count)")


def _known_issues(args: argparse.Namespace) -> list:
    """The triaged bugs a command judges with: shipped + --known-issues files (checked now:
    a bad file is one line naming it and the field, exit 2, before anything runs)."""
    from audee.triage.known import load_known_issues

    return load_known_issues(args.known_issues, shipped=not args.no_shipped_known_issues)


def check_out_dir(out: str | Path, flag: str = "--out") -> None:
    """An output directory that exists or can be made: not a file, not under one."""
    p = Path(out)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise AudeeError(f"{q} exists and is not a directory" + ("" if q == p else f" (needed for {p})"),
                                 field=flag)
            return


def cmd_fuzz(args: argparse.Namespace) -> int:
    from audee.backends.registry import parse_backends
    from audee.mutation.seeds import read_seed
    from audee.store.lock import dir_lock

    # every flag validated (audee.settings models) before anything is written or started
    check_out_dir(args.out)
    refs = parse_backends(args.backends, args.device, args.gpu_precision, _envs(args))
    entry = next((e for e in target_entries() if getattr(args, _dest(e.flag)) is not None), None)
    if entry is not None:  # cases of named targets (APIs, ops, activations): no seed, no search
        target_level, flag, what = entry.name, entry.flag, entry.plural
        names = parse_targets(entry.name, getattr(args, _dest(entry.flag)))
        cfg, plan = _fuzz_config(args, refs)
        if plan is not None or args.inputs:
            raise AudeeError(f"{entry.word}-level fuzzing draws its own inputs and runs no search stage",
                             field="--level" if plan is not None else "--inputs")
        args.known = _known_issues(args)
        with dir_lock(args.out):
            return _cmd_fuzz_level(args, refs, cfg, target_level, flag, what, names)
    args.seed = args.seed or "lenet5"
    cfg, plan = _fuzz_config(args, refs)
    if plan is not None and cfg.phase == "train" and plan.config.fitness != "inconsistency":
        raise AudeeError("the training phase searches the gradient distance (--fitness inconsistency, the default)",
                         field="--fitness")
    args.known = _known_issues(args)
    seed = None
    if not args.seed.endswith(".keras"):  # a .keras model is read by a worker, under the lock
        seed = read_seed(args.seed, RunStore(args.out).logs)  # its inputs: below, --inputs read first
        _check_seed(seed, plan, seed.source or args.seed)
    with dir_lock(args.out):  # one writer per --out: a second `audee fuzz` fails at once, writing nothing
        return _cmd_fuzz(args, refs, cfg, plan, seed)


def _dest(flag: str) -> str:
    """The attribute argparse stores ``flag`` under."""
    return flag.lstrip("-").replace("-", "_")


def _cmd_fuzz_level(args: argparse.Namespace, refs: list, cfg: Any, level: str, flag: str, what: str,
                    targets: list[str]) -> int:
    """A run of a level over named targets (:func:`audee.fuzz.fuzz_level`), with a progress bar."""
    from audee.fuzz import fuzz_level
    from audee.core.logs import setup_logging

    setup_logging(None, RunStore(args.out).log_file)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=cfg.variants * len(targets), desc=f"fuzz {len(targets)} {what}", unit="case",
                   file=sys.stderr)
    try:
        stats = fuzz_level(level, targets, cfg, progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    _write_and_print_summary(args, refs, f"{flag} ({len(targets)} {what})", stats)
    print(f"results: {RunStore(args.out).results_path}   cases: {RunStore(args.out).cases_dir}")
    return ExitCode.OK


def _fuzz_config(args: argparse.Namespace, refs: list) -> tuple[Any, Any]:
    """The run's FuzzConfig and search plan from the flags given, validated by FuzzSettings
    and SearchSettings (errors name the flag)."""
    from audee.fuzz import FuzzConfig

    given = given_options(args, list(FuzzSettings.flat_fields()))
    if args.profile is not None:  # the profile's settings, under the flags given
        given = apply_profile({"profile": args.profile, **given})
    validate_settings(FuzzSettings, given, flags=True)
    plan = _search_plan(args, refs, given.get("rng", 0))
    if "variants" not in given:
        given["variants"] = 0 if plan is not None else FuzzSettings.flat_fields()["variants"].default
    return FuzzConfig(refs, Path(args.out), **given), plan


def _check_seed(seed: Any, plan: Any, source: str) -> None:
    """The seed spec against the API configs (an unknown API or a wrongly typed parameter
    would only make every case fail), and --layer against its layers."""
    from audee.apis import load_api_configs
    from audee.cases.spec import validate

    validate(seed.spec, source=source, apis=load_api_configs())
    if plan is not None and plan.config.layer is not None:
        names = [layer.name for layer in seed.spec.layers]
        if plan.config.layer not in names:
            raise AudeeError(f"no layer {plan.config.layer!r} in seed {seed.name} (layers: {', '.join(names)})",
                             field="--layer")


def _cmd_fuzz(args: argparse.Namespace, refs: list, cfg: Any, plan: Any, seed: Any) -> int:
    from audee.fuzz import fuzz
    from audee.core.logs import setup_logging
    from audee.mutation.seeds import read_seed, with_inputs

    setup_logging(None, RunStore(args.out).log_file)
    if seed is None:
        seed = read_seed(args.seed, RunStore(args.out).logs)
        _check_seed(seed, plan, seed.source or args.seed)
    seed = with_inputs(seed, args.inputs)  # --inputs, inputs.npz beside a user's model, or generated
    inputs = seed.inputs
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        total = cfg.variants + 1 + (plan.on_consistent * len(plan.searches) if plan else 0)
        bar = tqdm(total=total, desc=f"fuzz {seed.name}", unit="step", file=sys.stderr)
    try:
        stats = fuzz(seed, inputs, cfg, progress=bar.update if bar is not None else None, plan=plan)
    finally:
        if bar is not None:
            bar.close()
    _write_and_print_summary(args, refs, seed.name, stats)
    for r in stats.searches:
        first = f"{r.first_failure_s:.1f} s" if r.first_failure_s is not None else "none"
        print(f"  search {r.search:<6} {r.target:<18} {r.level}/{r.fitness}: {r.generations} "
              f"generations, {r.evaluations} evaluations ({r.evals_per_s:.1f}/s), failures "
              f"{len(r.failures)}, first after {first}, best fitness {r.best_fitness:.4g}")
    print(f"results: {RunStore(args.out).results_path}   cases: {RunStore(args.out).cases_dir}")
    return ExitCode.OK


def _search_plan(args: argparse.Namespace, refs: list, rng: int = 0) -> Any:
    """A SearchPlan when --level (or a search config) asks for a search, else None; every
    check is the model's (audee.settings.SearchPlan)."""
    from audee.search.config import load_search_config
    from audee.settings import SEARCH_FLAGS, SearchPlan

    file_values = load_search_config(args.search_config) if args.search_config else {}
    plan = {"searches": args.search, "on_consistent": args.ga_on_consistent, "input_index": args.input_index}
    return SearchPlan.from_options(file_values, given_options(args, SEARCH_FLAGS),
                                   {k: v for k, v in plan.items() if v is not None}, [r.label for r in refs], rng)


#: each status as a root cause's line tags it (five letters, so the columns stay aligned)
STATUS_TAGS = {"new": "NEW  ", "found before": "FOUND", "known upstream": "KNOWN", "fixed upstream": "FIXED"}


def print_roots(roots: list[RootCause], unique_bugs: int, coverage: str | None = None) -> None:
    """The new bugs first (root causes of class bug by status) and what the counts cover,
    then the root causes (audee.triage.rootcause) per class as a maintainer counts them, then
    one line each: bugs first, new before the rest, each known one with where it is known."""
    from audee.triage.rootcause import CLASS_HELP, class_counts, new_bugs_line

    counts = class_counts(roots)
    print(f"  {new_bugs_line(roots)}")
    if coverage:
        print(f"  over {coverage}")
    print(f"  root causes          {len(roots)}  (from {unique_bugs} bug signatures; docs/oracles.md)")
    for klass, c in counts.items():
        print(f"    {klass:<12} {c['root_causes']:>4}  (new: {c['new']}, found before: {c['found before']}, "
              f"known upstream: {c['known upstream']}, fixed upstream: {c['fixed upstream']})  {CLASS_HELP[klass]}")
    for g in roots:
        tag = STATUS_TAGS.get(g.status, g.status)
        who = g.component or ",".join(g.odd) or "?" + ",".join(g.backends)
        what = g.op or g.api or "-"
        print(f"    {g.klass:<10} {tag} {g.kind:<20} {who:<14} {what}  "
              f"[{g.cases} case{'s' if g.cases != 1 else ''}, {g.signatures} signature"
              f"{'s' if g.signatures != 1 else ''}]")
        if g.status != "new":
            print(f"          {g.status}: {g.known_id}" + (f", {g.known_where}" if g.known_where else ""))
        elif g.alone and not g.new_bug:
            print(f"          its script run again alone: {g.alone} (not counted as a new bug)")
        if g.silent:
            print(f"          {g.silent} is silently different from the rest")
        if g.error:
            print(f"          {g.error}")
        if g.first_case:
            print(f"          first case: {g.first_case}")


def _write_and_print_summary(args: argparse.Namespace, refs: list, what: str, stats: Any) -> None:
    """``OUT/summary.json`` (unique bugs, counts) and its printed form, for both fuzz paths."""
    from audee.fuzz import summarize

    summary = summarize(Path(args.out), known=args.known)
    RunStore(args.out).write_summary(summary)
    print(f"audee fuzz {what} on {', '.join(r.label for r in refs)}: "
          f"{stats.run} test cases run now, {stats.skipped} resumed from {args.out}")
    _print_summary(summary)


def _print_summary(s: dict[str, Any]) -> None:
    if "roots" in s:
        from audee.triage import RootCause

        print_roots([RootCause.from_json(g) for g in s["roots"]], s["unique_bugs"])
    print(f"  test cases           {s['test_cases']}  (failing: {s['failing']})")
    print(f"  crashes   hard       {s['hard_crash']}" +
          (f"  ({', '.join(f'{k}: {v}' for k, v in s['hard_crash_detail'].items())})" if s['hard_crash_detail'] else ""))
    print(f"            divergent  {s['divergent_acceptance']}  (one backend accepts what another rejects)")
    print(f"            rejected   {s['consistent_rejection']}  (every backend refuses: expected)")
    print(f"  NaN/Inf              {s['nan']}  (strong, patterns differ between backends: {s['nan_strong']}; "
          f"explained by the input (NaN/Inf or overflow-scale values), not failures: {s.get('nan_propagated', 0)})")
    print(f"  deviations           {s.get('deviation', 0)}  (outputs differ beyond tolerance, see docs/oracles.md)")
    if s.get("equivalence"):
        print(f"  equivalences         {s['equivalence']}  (a backend computes a model and its equivalent differently, "
              "--equivalence)")
    if s.get("precision"):
        print(f"  precision            {s['precision']}  (a backend far less accurate than the best against the float64 "
              "reference, --reference)")
    print(f"  inconsistencies      {s['inconsistency']}")
    for pair, n in sorted(s["inconsistency_by_pair"].items()):
        print(f"    {pair.replace('|', ' vs '):<30} {n}")
    if s.get("skipped_runs"):
        print(f"  skipped runs         {', '.join(f'{b} {n}' for b, n in s['skipped_runs'].items())}  (the backend "
              "refused the API and dtype policy explicitly in an earlier case: --refusal-memo)")
    print(f"  mean time per case   {s['mean_seconds_per_case']:.3f} s")
    from audee.store.results import phase_lines

    for line in phase_lines(s.get("phases", {})):
        print(line)
    if s.get("by_api"):
        print("  per API              cases  failing  by kind")
        for api, a in s["by_api"].items():
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(a["by_kind"].items()))
            print(f"    {api:<24} {a['cases']:>5}  {a['failing']:>7}  {kinds}")


def cmd_reproduce(args: argparse.Namespace) -> int:
    from audee.repro.rerun import reproduce

    refs = _backend_refs(args)
    timeout = validate_settings(FuzzSettings, given_options(args, ["timeout"]), flags=True).timeout
    with tempfile.TemporaryDirectory(prefix="audee-repro-") as tmp:
        rep = reproduce(args.case, backends=refs, log_dir=Path(tmp), timeout=timeout,
                        allowed_plugins=args.allow_plugin)
    if args.json:
        print(json.dumps({"id": rep.record.id, "holds": rep.holds, "original": rep.original.to_json(),
                          "now": rep.result.verdict.to_json()}, default=str, indent=1))
    else:
        print(f"case {rep.record.id} ({args.case})")
        print(f"  recorded: {_describe(rep.original)}")
        print(f"  now:      {_describe(rep.result.verdict)}")
        print("  verdict holds" if rep.holds else "  verdict does NOT hold: the case no longer reproduces")
    return ExitCode.OK if rep.holds else ExitCode.NOT_REPRODUCED


def _describe(v: Any) -> str:
    if not v.findings:
        return "pass (all backends agree)"
    return "; ".join(f"{f.kind} [{', '.join(f.backends)}]" for f in v.findings)



def cmd_repro(args: argparse.Namespace) -> int:
    from audee.repro import EXIT_BAD_DATA, EXIT_NOT_REPRODUCED, EXIT_REPRODUCED, repro_case, run_script

    refs = _backend_refs(args)
    if args.out:
        check_out_dir(args.out)
    # the case's level writes its script (audee.levels: a model's, an op call's, a training step's)
    rep = repro_case(args.case, out=args.out, name=args.name, layer=args.layer, model=args.model, backends=refs,
                     allowed_plugins=args.allow_plugin, finding=args.finding)
    print(f"wrote {rep.script} (+ {rep.data.name}): {rep.describe()}")
    for note in rep.notes:
        print(f"  note: {note}")
    if args.no_run:
        return ExitCode.OK
    print(f"running python {rep.script} in a fresh process ...", flush=True)
    code, text = run_script(rep.script)
    print(text)
    if code == EXIT_REPRODUCED:
        print("the repro script reproduces the failure")
        return ExitCode.OK
    if code == EXIT_NOT_REPRODUCED:
        print("the repro script does NOT reproduce the failure: the case no longer fails")
        return ExitCode.NOT_REPRODUCED
    if code == EXIT_BAD_DATA:  # audee wrote the data a moment ago: the file system lost it, not the backend
        print(f"the repro script refused its data (exit {code}): {rep.data} is unreadable; no verdict")
        return ExitCode.BAD_INPUT
    print(f"the repro script could not run here (exit {code}): its environment is broken")
    return ExitCode.BACKEND_UNAVAILABLE


def cmd_recheck(args: argparse.Namespace) -> int:
    from audee.repro.recheck import Recheck, ScriptResult, default_out, recheck

    out = args.out or default_out(args.paths)
    if out is None:
        raise AudeeError("where to write the table: only a single run directory has a default (its recheck/)",
                         field="--out")
    check_out_dir(out)

    def show(row: ScriptResult, report: Recheck) -> None:
        print(f"[{len(report.rows)}/{len(report.scripts)}] {row.script}: {row.result} ({row.seconds:.0f} s): "
              f"{row.line}", flush=True)

    report = recheck(args.paths, Path(out), python=args.python, timeout=args.timeout, jobs=args.jobs,
                     tries=args.tries, progress=show)
    print(report.summary() + (f"; {report.kept} rows kept from the interrupted recheck there" if report.kept else ""))
    print(f"table: {Path(out) / 'recheck.md'} (+ recheck.csv, recheck.json)")
    return report.exit_code()


def cmd_bisect(args: argparse.Namespace) -> int:
    from audee.backends.registry import parse_envs
    from audee.core.yamlio import read_yaml_mapping
    from audee.repro.bisect import bisect

    if args.envs_from and args.env:
        raise AudeeError("give the environments by --env or by --envs-from, not both", field="--envs-from")
    if args.envs_from:
        doc = read_yaml_mapping(args.envs_from)
        if not isinstance(doc.get("envs"), dict):
            raise AudeeError("expected a mapping of environment names to interpreters, oldest first",
                             source=args.envs_from, field="envs")
        envs = parse_envs(doc["envs"], field=f"{args.envs_from}: envs")
    else:
        envs = _envs(args)
    timeout = validate_settings(FuzzSettings, given_options(args, ["timeout"]), flags=True).timeout
    with tempfile.TemporaryDirectory(prefix="audee-bisect-") as tmp:
        found = bisect(args.case, envs, backend=args.backend, log_dir=Path(tmp), timeout=timeout)
    print(json.dumps(found.to_json(), indent=1) if args.json else found.text())
    return found.exit_code()


def cmd_campaign(args: argparse.Namespace) -> int:
    from audee.campaign import load_campaign, run_shard, shard_of

    check_out_dir(args.out)
    campaign = load_campaign(args.config)
    flags = validate_settings(ShardSettings, given_options(args, list(ShardSettings.model_fields)), flags=True)
    node = campaign.node.model_copy(update=flags.given())  # a flag wins over the file
    index, count = shard_of(args.shard, shards=args.shards, out=Path(args.out), record=not args.list_units)
    units = campaign.shard(index, count)
    where = f"campaign {campaign.name} shard {index}/{count}"
    if args.list_units:  # which units this task would run; nothing is written
        print(f"{where}: {len(units)} of {len(campaign.units)} units", file=sys.stderr)
        for u in units:
            print(u.id)
        return ExitCode.OK
    ids = ", ".join(u.id for u in units)
    print(f"{where}: {len(units)} of {len(campaign.units)} units: {ids or '(none)'}", flush=True)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(units), desc=f"{campaign.name} shard {index}/{count}", unit="unit", file=sys.stderr)
    try:
        status = run_shard(campaign, Path(args.out), index, count, bar.update if bar is not None else None,
                           device=args.device, precision=args.gpu_precision, node=node)
    finally:
        if bar is not None:
            bar.close()
    print(f"campaign {campaign.name} shard {index}/{count}: {status['done']}/{status['units']} units done "
          f"in {args.out}")
    for e in status.get("errors", []):
        print(f"  unit {e['unit']} stopped on an internal error (units/{e['unit']}/ERROR.json): {e['error'][:200]}",
              file=sys.stderr)
    if status["done"]:
        from audee.report import load_campaign_dir

        _print_campaign_roots(load_campaign_dir(args.out), None)  # the shipped known issues
    return ExitCode.UNIT_ERRORS if status.get("errors") else ExitCode.OK


def cmd_localize(args: argparse.Namespace) -> int:
    from audee.levels import level_of
    from audee.localize import LocalizeConfig
    from audee.store.caserecord import CaseRecord

    refs = _backend_refs(args)
    pair = [p.strip() for p in args.pair.split(",")] if args.pair else None
    cfg = validate_settings(LocalizeConfig, given_options(args, list(LocalizeConfig.model_fields)), flags=True)
    timeout = validate_settings(FuzzSettings, given_options(args, ["timeout"]), flags=True).timeout
    # the case's level localizes it (audee.levels: Algorithm 2 for a model, audee.localize.train for a training step)
    found = level_of(CaseRecord.from_file(args.case)).localize(
        args.case, cfg, backends=refs, pair=pair, timeout=timeout, allowed_plugins=args.allow_plugin,
        repro_dir=args.repro)
    print(json.dumps(found.doc, indent=1, default=str) if args.json else found.text)
    if not found.reproduced:
        return ExitCode.NOT_REPRODUCED
    return ExitCode.OK if found.localized else ExitCode.NOT_LOCALIZED


def _print_campaign_roots(data: Any, known: list | None, rechecked: Path | None = None,
                          python: str | None = None) -> None:
    """The root causes over every unit of a campaign directory so far, per class;
    ``rechecked``: the report directory whose scripts were run again alone (their kept results)."""
    from audee.report.write import campaign_bugs
    from audee.triage.rootcause import root_causes

    bugs = campaign_bugs(data, known)
    roots = root_causes(bugs)
    if rechecked is not None:
        from audee.report.alone import recheck_new

        roots = recheck_new(roots, rechecked, python)
    print_roots(roots, len(bugs), data.coverage_line())


def cmd_report(args: argparse.Namespace) -> int:
    from audee.report import load_campaign_dir, write_report

    known = _known_issues(args)
    data = load_campaign_dir(args.dir, resign=args.resign)
    if data.cases.empty:  # a report of zeros would read as a clean campaign
        units = f" in its {len(data.progress.known)} units" if data.progress is not None else ""
        raise AudeeError(f"no test case to report{units}: nothing ran there yet", source=str(args.dir))
    out = Path(args.out or Path(args.dir) / "report")
    written = write_report(data, out, known=known, recheck_new=args.recheck_new, python=args.python)
    _print_campaign_roots(data, known, out if args.recheck_new else None, args.python)
    print(f"report: {written[-1]} ({len(written)} files)")
    return ExitCode.OK


def cmd_backends(args: argparse.Namespace) -> int:
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    refs = parse_backends(args.backends, args.device, args.gpu_precision, _envs(args))
    with tempfile.TemporaryDirectory(prefix="audee-backends-") as tmp, Pool(refs, Path(tmp)) as pool:
        failed = pool.start()
        rows = []
        for label, w in pool.workers.items():
            f = failed.get(label)
            rows.append({"backend": label, "class": w.ref.target, "device": w.ref.device, "usable": f is None,
                         "precision": w.precision_state or {"mode": w.ref.precision},
                         "versions": w.versions, "error": f.line if f else "",
                         **({"env": w.ref.env, "python": w.executable or w.ref.python} if w.ref.env else {})})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            state = "usable" if r["usable"] else f"NOT usable: {r['error']}"
            vers = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
            prec = dict(r["precision"])
            mode = prec.pop("mode", "full")
            if prec:
                mode += " (" + ", ".join(f"{k}={v}" for k, v in prec.items()) + ")"
            where = f"; environment {r['env']} ({r['python']})" if r.get("env") else ""
            print(f"{r['backend']:<22} {r['device']:<6} {state:<8}  {vers}; precision {mode}{where}")
    return ExitCode.OK if all(r["usable"] for r in rows) else ExitCode.BACKEND_UNAVAILABLE


def cmd_seeds(args: argparse.Namespace) -> int:
    from audee.mutation.seeds import list_seeds, load_seed

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
    return ExitCode.OK


def cmd_apis(args: argparse.Namespace) -> int:
    from audee.apis import load_api_configs, load_op_configs

    if args.ops and args.seed:
        raise AudeeError("--seed lists a seed's layers: not with --ops", field="--ops")
    apis = load_op_configs() if args.ops else load_api_configs()
    if args.coverage and args.seed:
        from audee.apis.coverage import render_seed_coverage, seed_coverage
        from audee.mutation.seeds import read_seed

        with tempfile.TemporaryDirectory(prefix="audee-apis-") as tmp:
            rows = seed_coverage(read_seed(args.seed, tmp).spec, apis)  # the spec alone
        print(json.dumps(rows, indent=1) if args.json else render_seed_coverage(rows))
        return ExitCode.OK
    if args.coverage:
        os.environ.setdefault("KERAS_BACKEND", "jax")  # keras is imported here, for this command only
        from audee.apis.coverage import (coverage_rows, excluded_layers, excluded_ops, render_coverage,
                                         uncovered_layers, uncovered_ops)

        cov = coverage_rows(apis)
        uncovered = uncovered_ops(apis) if args.ops else uncovered_layers(apis)
        excluded: dict[str, list[str]] = {}  # reason -> the names it excludes: each one said with its reason
        for name, reason in (excluded_ops() if args.ops else excluded_layers()).items():
            excluded.setdefault(reason, []).append(name)
        what = "ops" if args.ops else "layers"
        if args.json:
            print(json.dumps({"parameters": cov, f"uncovered_{what}": uncovered, f"excluded_{what}": excluded},
                             indent=1))
        else:
            print(render_coverage(cov, uncovered, what="ops" if args.ops else "layers", excluded=excluded))
        gaps = uncovered or [r for r in cov if r["status"] in ("missing", "not_in_keras")]
        return ExitCode.COVERAGE_GAP if gaps else ExitCode.OK
    rows = [{"api": name, "category": c.category, "params": [*c.args, *c.params]} for name, c in sorted(apis.items())]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['api']:<24} {r['category']:<14} {', '.join(r['params'])}")
        print(f"{len(rows)} {'ops' if args.ops else 'APIs'}")
    return ExitCode.OK


COMMANDS = {"fuzz": cmd_fuzz, "reproduce": cmd_reproduce, "localize": cmd_localize, "repro": cmd_repro, "recheck": cmd_recheck, "bisect": cmd_bisect, "campaign": cmd_campaign, "report": cmd_report, "backends": cmd_backends, "seeds": cmd_seeds,
            "apis": cmd_apis}


def main(argv: Sequence[str] | None = None) -> int:
    from audee.core import signals
    from audee.core.logs import close_log_file, setup_logging

    args = build_parser().parse_args(argv)
    signals.install()  # SIGTERM unwinds like Ctrl-C: temp dirs, locks, workers freed
    setup_logging(-1 if args.quiet else args.verbose)
    log.debug("audee %s: %s", __version__, args.command)
    try:
        check_environment()  # AUDEE_* variables checked like flags: one line naming the variable, exit 2
        code = COMMANDS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at interpreter exit
        return int(code)
    except AudeeError as exc:
        print(f"audee: error: {exc}", file=sys.stderr)
        return int(ExitCode.BACKEND_UNAVAILABLE if isinstance(exc, BackendUnavailable) else ExitCode.BAD_INPUT)
    except KeyboardInterrupt:
        print("audee: interrupted; rerun the same command to resume", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # stdout went away (`audee seeds | head -1`): end quietly, as a tool killed by SIGPIPE would.
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return int(ExitCode.BROKEN_PIPE)
    finally:
        close_log_file()
        signals.finished()


if __name__ == "__main__":
    sys.exit(main())
