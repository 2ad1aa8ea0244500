"""Run a campaign shard: each unit is one `audee fuzz` run in ``OUT/units/<unit id>/``.

Resumable at two depths: a finished unit has ``DONE.json`` (written atomically, last) and
is skipped; an interrupted unit is rerun in place, where the fuzz run itself skips every
test case and search already in its tables.  So a preempted or killed task loses nothing
that was committed.  A unit with ``localize`` settings then runs the RQ2 stage
(``localize/``, its own commit point ``localize/DONE.json``; see localize_stage).  Each
shard keeps ``OUT/status/shard-I-of-N.json`` up to date, and keeps its backend workers
alive across units (``OUT/logs/shard-I-of-N/``).  One process per shard and per unit at a
time (``OUT/locks/shard-I-of-N.lock``, ``OUT/units/<id>/.audee.lock``); a job array's shard
layout is fixed on first use in ``OUT/shards.json`` (see :func:`shard_of`).
"""
from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import signal
import socket
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from audee.backends.pool import Pool, worker_processes
from audee.backends.registry import parse_backends
from audee.campaign.config import Campaign, Unit
from audee.campaign.localize_stage import localize_unit, pending
from audee.core.cpus import default_parallel_units, task_cpus
from audee.core.bounded import MAX_TEXT_BYTES, read_bytes
from audee.core.errors import AudeeError, BackendUnavailable
from audee.fuzz import FuzzConfig, check_resume, fuzz, fuzz_apis, fuzz_ops, run_config, summarize
from audee.core.logs import setup_logging
from audee.reference.run import reference_workers
from audee.mutation.seeds import read_seed, with_inputs
from audee.settings import ShardSettings
from audee.store.atomic import create_atomic, write_atomic
from audee.store.lock import dir_lock, locked
from audee.store.campaigndir import CampaignDir
from audee.store.runstore import RunStore


log = logging.getLogger(__name__)

LAYOUT = "shards.json"   # OUT/shards.json: how job-array task ids map to shards, fixed on first use


def _int(value: str, name: str) -> int:
    try:
        return int(value.strip())
    except (ValueError, AttributeError):
        raise AudeeError(f"expected an integer, got {value!r}", field=name) from None


def read_layout(out: Path | None) -> dict[str, Any] | None:
    """The recorded shard layout ``{count, ids}`` of a campaign directory, if any."""
    if out is None or not (Path(out) / LAYOUT).is_file():
        return None
    path = Path(out) / LAYOUT
    try:
        doc = json.loads(read_bytes(path, MAX_TEXT_BYTES))
        count, ids = doc["count"], doc["ids"]
        ok = isinstance(count, int) and count >= 1 and isinstance(ids, list) and len(ids) == count \
            and all(isinstance(i, int) for i in ids) and len(set(ids)) == count
    except (AudeeError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise AudeeError("expected {\"count\": N, \"ids\": [N distinct task ids]}; fix or remove it",
                         source=str(path))
    return {"count": count, "ids": ids}


def _record_layout(out: Path, layout: dict[str, Any], how: str) -> None:
    """Write OUT/shards.json unless it exists (atomic create: concurrent first tasks agree)."""
    recorded = read_layout(out)
    if recorded is None:
        create_atomic(out / LAYOUT, (json.dumps({**layout, "from": how}, indent=1) + "\n").encode())
        recorded = read_layout(out)
    if recorded != layout:
        raise AudeeError(f"this task's layout ({how}: {layout['count']} shards, task ids {_ids(layout['ids'])}) "
                         f"conflicts with the recorded one ({recorded['count']} shards, task ids "
                         f"{_ids(recorded['ids'])}); use a new --out or the recorded layout",
                         source=str(out / LAYOUT))


def _ids(ids: list[int]) -> str:
    if len(ids) > 1 and all(b - a == ids[1] - ids[0] for a, b in zip(ids, ids[1:])):
        step = ids[1] - ids[0]
        return f"{ids[0]}-{ids[-1]}" + (f":{step}" if step != 1 else "")
    return ",".join(map(str, ids))


def shard_of(arg: str | None, env: dict[str, str] | None = None, *, shards: int | None = None,
             out: Path | None = None, record: bool = True) -> tuple[int, int]:
    """The shard ``(I, N)`` this process runs.

    ``--shard I/N`` wins.  Inside a SLURM job array: with ``--shards N`` the shard is the
    task id itself (``0 <= id < N``); without it, the layout is derived from the array on
    first use (ids ``MIN..MAX:STEP``, shard = position of the task id) and recorded in
    ``OUT/shards.json``, which later tasks (a single-task resubmission such as ``--array=3``)
    read instead of their own array variables.  Outside SLURM: the whole campaign, ``(0, 1)``.
    A layout that conflicts with ``OUT/shards.json`` is an error (``record=False``: read it
    but never write it).
    """
    env = dict(os.environ) if env is None else env
    out = Path(out) if out is not None else None
    recorded = read_layout(out)
    if arg:
        try:
            i, n = (int(x) for x in arg.split("/"))
        except ValueError:
            raise AudeeError(f"expected I/N such as 0/4, got {arg!r}", field="--shard") from None
        if not 0 <= i < n:
            raise AudeeError(f"need 0 <= I < N, got {arg!r}", field="--shard")
        if recorded is not None and recorded["count"] != n:
            raise AudeeError(f"--shard {arg} conflicts with the recorded layout of {recorded['count']} shards "
                             f"({out / LAYOUT}); use --shard I/{recorded['count']} or a new --out", field="--shard")
        return i, n
    task = _int(env["SLURM_ARRAY_TASK_ID"], "SLURM_ARRAY_TASK_ID") if "SLURM_ARRAY_TASK_ID" in env else None
    if shards is not None:
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise AudeeError(f"expected a positive number of shards, got {shards!r}", field="--shards")
        if task is None:
            raise AudeeError("needs SLURM_ARRAY_TASK_ID (one task of a job array); outside SLURM use --shard I/N",
                             field="--shards")
        if not 0 <= task < shards:
            raise AudeeError(f"SLURM_ARRAY_TASK_ID={task} is not a shard of --shards {shards} (need 0 <= id < "
                             f"{shards}: submit with --array=0-{shards - 1}, or a subset of those ids)",
                             field="--shards")
        layout = {"count": shards, "ids": list(range(shards))}
        if out is not None and (record or recorded is not None):
            if recorded is not None and recorded != layout:
                raise AudeeError(f"--shards {shards} conflicts with the recorded layout of {recorded['count']} "
                                 f"shards, task ids {_ids(recorded['ids'])} ({out / LAYOUT}); use a new --out",
                                 field="--shards")
            if record:
                _record_layout(out, layout, "--shards")
        return task, shards
    if task is None:
        return 0, 1
    if recorded is not None:  # a later task, e.g. one resubmitted alone: the recorded layout decides
        if task not in recorded["ids"]:
            raise AudeeError(f"SLURM_ARRAY_TASK_ID={task} is not one of the task ids {_ids(recorded['ids'])} "
                             f"recorded in {out / LAYOUT} (to change the layout, remove that file once no task "
                             f"of the old one runs)", field="SLURM_ARRAY_TASK_ID")
        return recorded["ids"].index(task), recorded["count"]
    lo = _int(env.get("SLURM_ARRAY_TASK_MIN", "0"), "SLURM_ARRAY_TASK_MIN")
    step = _int(env.get("SLURM_ARRAY_TASK_STEP", "1"), "SLURM_ARRAY_TASK_STEP")
    count = _int(env["SLURM_ARRAY_TASK_COUNT"], "SLURM_ARRAY_TASK_COUNT") if "SLURM_ARRAY_TASK_COUNT" in env \
        else None
    if step < 1:
        raise AudeeError(f"expected a positive step, got {step}", field="SLURM_ARRAY_TASK_STEP")
    if "SLURM_ARRAY_TASK_MAX" in env:
        hi = _int(env["SLURM_ARRAY_TASK_MAX"], "SLURM_ARRAY_TASK_MAX")
    elif count is not None:
        hi = lo + (count - 1) * step
    else:
        raise AudeeError("neither SLURM_ARRAY_TASK_MAX nor SLURM_ARRAY_TASK_COUNT is set; pass --shards N "
                         "(or --shard I/N)", field="SLURM_ARRAY_TASK_ID")
    ids = list(range(lo, hi + 1, step))
    if count is not None and count != len(ids):
        raise AudeeError(f"the job array's {count} task ids are not the range {_ids(ids) if ids else '(empty)'} "
                         f"(sparse ids such as --array=1,3,7?): pass --shards N and submit --array=0-(N-1) "
                         f"or a subset of it", field="SLURM_ARRAY_TASK_COUNT")
    if task not in ids:
        raise AudeeError(f"SLURM_ARRAY_TASK_ID={task} is not in the array {_ids(ids) if ids else '(empty)'} "
                         f"(SLURM_ARRAY_TASK_MIN/MAX/STEP; sparse ids such as --array=1,3,7?): pass --shards N "
                         f"and submit --array=0-(N-1) or a subset of it", field="SLURM_ARRAY_TASK_ID")
    if out is not None and record:
        _record_layout(out, {"count": len(ids), "ids": ids}, f"job array {_ids(ids)}")
    return ids.index(task), len(ids)


def unit_dir(out: Path, unit: Unit) -> Path:
    """``OUT/units/<id>``, checked to lie inside OUT (a unit id is one safe path component)."""
    return CampaignDir(out).unit_dir(unit.id)


def check_seeds(units: list[Unit], source: str, log_dir: Path | None = None) -> None:
    """Every seed of ``units`` loads, its spec passes the API configs (a configured layer's
    parameters typed right; any other layer a ``keras.layers`` class, run unmutated) and
    its inputs are there (the run's ``inputs:`` file fits the spec, or the seed's own, or
    generated); a search ``layer`` names a layer of it.  A bad seed is one line naming the
    campaign file and the run's field, before the first unit runs."""
    from audee.apis import load_api_configs, load_op_configs
    from audee.core.errors import ConfigError
    from audee.cases.spec import validate

    apis = load_api_configs()
    for u in units:
        for api in u.apis or ():
            if api not in apis:  # a config removed since the campaign's units were listed
                raise ConfigError(f"unknown API {api!r} (unit {u.id})", source=source, field="apis")
    ops = load_op_configs()
    for u in units:
        for op in u.ops or ():
            if op not in ops:
                raise ConfigError(f"unknown op {op!r} (unit {u.id})", source=source, field="ops")
    units = [u for u in units if u.apis is None and u.ops is None]
    specs = {}
    for u in sorted({(u.seed, u.inputs): u for u in units}.values(), key=lambda u: (u.seed, u.inputs or "")):
        field = u.origin or "seeds"
        try:
            s = read_seed(u.seed, log_dir)  # the unit's inputs, read before any are generated
            validate(s.spec, source=s.source or u.seed, apis=apis)
        except BackendUnavailable:
            raise  # no TensorFlow worker to read a .keras seed: not the file's fault
        except AudeeError as exc:
            raise ConfigError(str(exc), source=source, field=field) from None
        try:
            with_inputs(s, u.inputs, field=None)
        except AudeeError as exc:
            raise ConfigError(str(exc), source=source, field=field.rsplit(".seeds", 1)[0] + ".inputs") from None
        specs[u.seed] = s.spec
    for u in units:
        layer = (u.search or {}).get("layer")
        if layer is not None and layer not in {x.name for x in specs[u.seed].layers}:
            raise ConfigError(f"no layer {layer!r} in seed {u.seed} (unit {u.id})", source=source, field="search.layer")


def check_resumes(units: list[Unit], out: Path, device: str = "cpu", precision: str | None = None) -> None:
    """Every unit directory that holds a run holds this campaign's settings for it
    (:func:`audee.fuzz.check_resume`; a finished unit's ``variants`` too): a campaign file
    changed under a finished or half-run ``--out`` is one line naming the unit's
    ``config.json`` and the setting, before the first unit runs, never "done" with the old
    campaign's rows."""
    for unit in units:
        udir = unit_dir(out, unit)
        store = RunStore(udir)
        if not (udir / "config.json").is_file():
            continue
        cfg, plan = unit_config(unit, udir, device, precision)
        header: dict[str, Any] = ({"apis": list(unit.apis)} if unit.apis is not None else
                                  {"ops": list(unit.ops)} if unit.ops is not None else
                                  {"search": plan.to_json() if plan else None})
        check_resume(store, run_config(cfg, header), finished=store.committed())


def unit_config(unit: Unit, out: Path, device: str = "cpu",
                precision: str | None = None) -> tuple[FuzzConfig, Any]:
    """The unit's FuzzConfig (settings it does not give take FuzzSettings' defaults, the
    same as `audee fuzz` flags) and its search plan."""
    cfg = FuzzConfig(parse_backends(list(unit.backends), device, precision, unit.envs), out, **unit.settings)
    plan = None
    if unit.search:
        from audee.search.config import make_config
        from audee.search.runner import SearchPlan

        raw = {k: v for k, v in unit.search.items() if k not in ("searches", "on_consistent", "input_index")}
        plan = SearchPlan(make_config(raw, {"rng": cfg.rng}, unit.id), list(unit.search["searches"]),
                          unit.search["on_consistent"], unit.search.get("input_index"))
    return cfg, plan


class _Pools:
    """One set of workers, kept across units with the same backends: framework start-up
    (3-10 s per backend) is paid once per backend set, not once per unit.  One set is
    alive at a time, and units run grouped by backend set.  ``sets``: worker sets running
    at once in this task (the shard's parallel units), which share its CPUs and GPUs."""

    def __init__(self, log_dir: Path, sets: int = 1, shards_per_gpu: int = 1, cpus: int | None = None):
        self.log_dir = log_dir
        self.sets, self.shards_per_gpu, self.cpus = sets, shards_per_gpu, cpus
        self.key: tuple | None = None
        self.pool: Pool | None = None

    def get(self, cfg: FuzzConfig) -> Pool:
        reference = reference_workers(cfg, cfg.backends)
        key = tuple((b.label, b.target, b.device, b.precision) for b in cfg.backends + reference)
        if key != self.key or self.pool is None:
            self.close()
            pool = Pool(cfg.backends, self.log_dir, timeout=cfg.timeout, threads=cfg.threads, sets=self.sets,
                        shards_per_gpu=self.shards_per_gpu, cpus=self.cpus, reference=reference)
            self.pool, self.key = pool.start_or_fail(logs=self.log_dir, field="--backends"), key
        return self.pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.pool, self.key = None, None


def parallel_units(units: list[Unit], node: ShardSettings, cpus: int, device: str = "cpu",
                   precision: str | None = None) -> int:
    """Units this shard runs at once: ``node.parallel_units`` if given, else one per
    (worker processes per unit) of the task's CPUs (:func:`audee.core.cpus.default_parallel_units`;
    a converter hosting the Keras backend it converts is one process, ``pool.worker_processes``);
    never more than there are units to run."""
    if not units:
        return 1
    width = max(worker_processes(parse_backends(list(u.backends), device, precision, u.envs)) for u in units)
    want = node.parallel_units or default_parallel_units(cpus, width, len(units))
    return max(1, min(want, len(units)))


def _finished(unit: Unit, udir: Path) -> bool:
    return RunStore(udir).committed() and not pending(unit, udir)


def _attempt(unit: Unit, udir: Path, pools: _Pools, device: str, precision: str | None,
             stage: Callable[[str], None]) -> dict[str, Any]:
    """Run one unit under its lock: ``{"done": wall s, "cpu": this process's CPU s}``, or
    for an internal error (an audee bug in one unit must not stop the others)
    ``{"error": record}`` with the record written to ``ERROR.json``.  Bad input (AudeeError) and interrupts propagate."""
    log.info("unit %s: started (%s on %s)", unit.id, unit.seed, ", ".join(unit.backends))
    t_unit, cpu0 = time.perf_counter(), time.process_time()
    try:
        with dir_lock(udir):  # another shard layout working on this unit fails here, writing nothing
            _run_unit(unit, udir, stage, pools, device, precision)
    except AudeeError:
        raise  # bad input (a config, a lock held): the same for every unit
    except Exception as exc:
        log.exception("unit %s: stopped by an internal error; the shard goes on", unit.id)
        return {"error": _error_record(unit, udir, f"{type(exc).__name__}: {exc}", traceback.format_exc())}
    RunStore(udir).clear_error()
    return {"done": time.perf_counter() - t_unit, "cpu": time.process_time() - cpu0}


def _error_record(unit: Unit, udir: Path, error: str, tb: str) -> dict[str, Any]:
    record = {"unit": unit.id, "error": error[:2000], "traceback": tb[-8000:],
              "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    RunStore(udir).write_error(record)
    return record


def run_shard(campaign: Campaign, out: Path, index: int, count: int,
              progress: Callable[[int], Any] | None = None, device: str = "cpu",
              precision: str | None = None, node: ShardSettings | None = None) -> dict[str, Any]:
    """Run shard ``index`` of ``count``.  ``node`` (default: the campaign file's top-level
    settings) says how many units run at once and how GPUs are shared."""
    out = Path(out)
    with locked(out / "locks" / f"shard-{index}-of-{count}.lock", f"shard {index}/{count} of {out}"):
        return _run_shard(campaign, out, index, count, progress, device, precision,
                          campaign.node if node is None else node)


def _run_shard(campaign: Campaign, out: Path, index: int, count: int,
               progress: Callable[[int], Any] | None, device: str,
               precision: str | None, node: ShardSettings) -> dict[str, Any]:
    units = campaign.shard(index, count)
    for unit in units:
        unit_dir(out, unit)  # every unit directory inside OUT, checked before anything runs
    # every seed of the campaign (spec, inputs, search layer) checked now, not hours into the shard
    check_seeds(campaign.units, campaign.source, out / "logs")
    check_resumes(units, out, device, precision)  # a changed campaign file on an existing --out: refused now
    status_path = CampaignDir(out).status_path(index, count)
    status: dict[str, Any] = {"campaign": campaign.name, "shard": index, "shards": count,
                              "host": socket.gethostname(), "pid": os.getpid(), "units": len(units),
                              "unit_ids": [u.id for u in units], "done": 0, "current": None,
                              "started": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def save_status() -> None:
        status["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        write_atomic(status_path, json.dumps(status, indent=1).encode())

    log_dir = out / "logs" / f"shard-{index}-of-{count}"
    setup_logging(None, log_dir / "audee.log")  # the shard's own log, beside its workers' logs
    log.info("campaign %s shard %d/%d: %d units -> %s", campaign.name, index, count, len(units), out)
    log.info("shard %d/%d unit ids: %s", index, count, ", ".join(u.id for u in units) or "(none)")
    todo = []
    for unit in sorted(units, key=lambda u: (u.backends, u.id)):  # same workers for a run of units
        if _finished(unit, unit_dir(out, unit)):
            status["done"] += 1
            log.info("unit %s: done before, skipped", unit.id)
            if progress is not None:
                progress(1)
        else:
            todo.append(unit)
    cpus = task_cpus()
    width = parallel_units(todo, node, cpus, device, precision)
    status.update(cpus=cpus, parallel_units=width)
    log.info("shard %d/%d: %d CPUs, %d units to run, %d at once", index, count, cpus, len(todo), width)

    def finish(unit: Unit, got: dict[str, Any]) -> None:
        if "error" in got:
            status.setdefault("errors", []).append({k: got["error"][k] for k in ("unit", "error")})
            save_status()
            return
        status["done"] += 1
        status.setdefault("cpu_seconds", {})[unit.id] = round(got["cpu"], 2)
        log.info("unit %s: done in %.1f s (%d/%d units of the shard)", unit.id, got["done"], status["done"],
                 len(units))
        if progress is not None:
            progress(1)

    if width <= 1:
        pools = _Pools(log_dir, 1, node.shards_per_gpu, cpus)
        try:
            for unit in todo:
                def stage(name: str, unit: Unit = unit) -> None:
                    status["current"], status["stage"] = unit.id, name
                    save_status()

                finish(unit, _attempt(unit, unit_dir(out, unit), pools, device, precision, stage))
        finally:
            pools.close()
    else:
        _run_parallel(campaign, out, index, count, todo, width, node, cpus, device, precision, status, save_status,
                      finish)
    status["current"] = status["stage"] = None
    status.pop("running", None)
    save_status()
    log.info("campaign %s shard %d/%d finished: %d/%d units done", campaign.name, index, count, status["done"],
             len(units))
    return status


# ---- parallel units: one process per slot, each with its own worker set ------------------------------------
# Processes, not threads: a slot stopped by SIGTERM or Ctrl-C must stop writing before its
# workers are killed (else their death reads as a hard crash of the case), which a process does
# exactly like a serial shard; a dying slot takes only its unit.  The GIL would not have decided
# it: the driver uses about 1% of a unit's wall in CPU (docs/scaling.md, bench_shards.py).

STOP_GRACE_S = 30.0   # seconds a slot gets to unwind (kill its workers, release its unit lock) after SIGTERM


def _run_parallel(campaign: Campaign, out: Path, index: int, count: int, todo: list[Unit], width: int,
                  node: ShardSettings, cpus: int, device: str, precision: str | None, status: dict[str, Any],
                  save_status: Callable[[], None], finish: Callable[[Unit, dict[str, Any]], None]) -> None:
    """Run ``todo`` on ``width`` slot processes pulling unit ids from one queue (in the
    serial order, so a slot's consecutive units mostly share its workers); every state
    change comes back as an event and is recorded here, in the shard process."""
    from audee.core import logs

    # The queues' semaphores are tracked by multiprocessing's resource tracker, a process of
    # its own started with them; when a failing shard stops its slots, the tracker may find
    # one already unlinked at shutdown and print a "leaked semaphore" warning after the
    # shard's one-line error.  Nothing leaks (the tracker cleans up whatever is left), so its
    # process (which takes the warning filters from the environment) is told to keep quiet.
    quiet = "ignore:resource_tracker:UserWarning"
    if quiet not in os.environ.get("PYTHONWARNINGS", "").split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), quiet]))
    ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads and open locks
    tasks, events = ctx.Queue(), ctx.Queue()
    for unit in todo:
        tasks.put(unit.id)
    for _ in range(width):
        tasks.put(None)
    by_id = {u.id: u for u in todo}
    running: dict[int, str] = {}       # slot -> unit id
    status["running"] = {}
    procs = [ctx.Process(target=_slot_main, name=f"audee-shard{index}-slot{j}",
                         args=(j, campaign, out, index, count, width, node, cpus, device, precision,
                               logs.verbosity(), tasks, events, os.getpid()))
             for j in range(width)]

    def handle(ev: tuple) -> None:
        kind, slot, uid, payload = ev
        if kind == "fatal":  # the slot's error, its kind kept: a backend that cannot start exits 4 here too
            raise (BackendUnavailable if payload["unavailable"] else AudeeError)(payload["message"])
        if kind == "stage":
            running[slot] = uid
            status["running"][uid] = payload
        else:  # "result"
            running.pop(slot, None)
            status["running"].pop(uid, None)
            finish(by_id[uid], payload)
        first = next(iter(status["running"]), None)
        status["current"], status["stage"] = first, status["running"].get(first)
        save_status()

    def drain() -> None:
        while True:
            try:
                handle(events.get_nowait())
            except queue.Empty:
                return

    try:
        for p in procs:
            p.start()
        while True:
            try:
                handle(events.get(timeout=0.5))
                continue
            except queue.Empty:
                pass
            if all(p.exitcode is not None for p in procs):
                drain()
                break
            for slot, p in enumerate(procs):
                if p.exitcode is not None and slot in running:
                    drain()  # its last events may have arrived since
                    if slot in running:
                        _slot_died(by_id[running.pop(slot)], out, slot, p.exitcode, status, finish)
        for slot, p in enumerate(procs):
            if slot in running:
                _slot_died(by_id[running.pop(slot)], out, slot, p.exitcode, status, finish)
        seen = set(status.get("cpu_seconds", {})) | {e["unit"] for e in status.get("errors", [])}
        for unit in todo:  # every slot died before reaching these
            if unit.id not in seen:
                finish(unit, {"error": _error_record(unit, unit_dir(out, unit),
                                                     "not run: every unit process of the shard stopped", "")})
    finally:
        for p in procs:
            if p.exitcode is None and p.pid is not None:
                try:
                    os.kill(p.pid, signal.SIGTERM)  # it unwinds like a serial shard: workers killed, lock freed
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            if p.pid is not None:
                p.join(max(0.1, deadline - time.monotonic()))
                if p.exitcode is None:
                    p.kill()
                    p.join()
        tasks.cancel_join_thread()
        events.cancel_join_thread()


def _slot_died(unit: Unit, out: Path, slot: int, code: int | None, status: dict[str, Any],
               finish: Callable[[Unit, dict[str, Any]], None]) -> None:
    """A slot process died mid-unit (a signal, the OOM killer): the unit is an error, like an
    internal one (rerunning resumes it); the other slots go on."""
    status["running"].pop(unit.id, None)
    log.error("unit %s: its process (slot %d) died with exit code %s; the shard goes on", unit.id, slot, code)
    finish(unit, {"error": _error_record(unit, unit_dir(out, unit),
                                         f"the unit's process (slot {slot}) died with exit code {code}", "")})


def _slot_main(slot: int, campaign: Campaign, out: Path, index: int, count: int, width: int, node: ShardSettings,
               cpus: int, device: str, precision: str | None, verbosity: int, tasks: Any, events: Any,
               parent: int) -> None:
    """One slot process: take unit ids until the queue says stop, run each with this
    slot's own workers (``OUT/logs/shard-I-of-N/slot-J/``), report every state change.
    Stopped by the shard (SIGTERM, which unwinds like a serial shard); Ctrl-C goes to the
    shard, which then stops the slots; it dies with the shard if that one is killed."""
    from audee.core import signals
    from audee.backends.worker import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signals.install(announce=False)  # the shard says it, once
    die_with_parent(parent)
    log_dir = out / "logs" / f"shard-{index}-of-{count}"
    setup_logging(verbosity, log_dir / "audee.log")
    units = {u.id: u for u in campaign.shard(index, count)}
    pools = _Pools(log_dir / f"slot-{slot}", width, node.shards_per_gpu, cpus)
    uid = None
    try:
        while (uid := tasks.get()) is not None:
            unit = units[uid]
            got = _attempt(unit, unit_dir(out, unit), pools, device, precision,
                           lambda name, uid=uid: events.put(("stage", slot, uid, name)))
            events.put(("result", slot, uid, got))
    except AudeeError as exc:
        events.put(("fatal", slot, uid, {"message": str(exc), "unavailable": isinstance(exc, BackendUnavailable)}))
    finally:
        pools.close()
        signals.finished()  # the shard may stop this slot while the interpreter ends it


def _run_unit(unit: Unit, udir: Path, stage: Callable[[str], None], pools: "_Pools",
              device: str, precision: str | None) -> None:
    """One unit, under its directory lock: the fuzz run (DONE.json commits it), then the RQ2 stage."""
    store = RunStore(udir)
    done = store.committed()  # read again under the lock: another task may have finished it
    if done and not pending(unit, udir):
        return
    stage("localize" if done else "fuzz")
    cfg, plan = unit_config(unit, udir, device, precision)
    pool = pools.get(cfg)
    pool.set_timeout(cfg.timeout)  # the pool outlives units; each has its own limit
    if not done:
        t0 = time.perf_counter()
        if unit.apis is not None:  # API-level unit: small models around each of its APIs
            fuzz_apis(list(unit.apis), cfg, pool=pool)
        elif unit.ops is not None:  # op-level unit: keras.ops calls (docs/ops.md)
            fuzz_ops(list(unit.ops), cfg, pool=pool)
        else:
            seed = with_inputs(read_seed(unit.seed, store.logs), unit.inputs, field=None)
            fuzz(seed, seed.inputs, cfg, plan=plan, pool=pool)
        summary = {"unit": unit.id, "seed": unit.seed, "apis": list(unit.apis) if unit.apis else None,
                   **({"ops": list(unit.ops)} if unit.ops else {}),
                   "backends": list(unit.backends),
                   "settings": unit.settings, "search": unit.search, "localize": unit.localize,
                   "seconds": round(time.perf_counter() - t0, 2), **summarize(udir)}
        store.commit(summary)  # the unit's commit point, written last
    if pending(unit, udir):
        if not done:
            stage("localize")
        localize_unit(unit, udir, pool)  # RQ2 stage: its own commit point, localize/DONE.json
