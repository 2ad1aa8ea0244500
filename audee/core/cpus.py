"""How many CPUs this task has, and how they are shared among the backend workers.

The one owner of the rule; the pool (threads per worker) and the campaign runner (units a
shard runs at once) call it.  ``os.cpu_count()`` is the node's core count, not the task's:
a SLURM task with ``--cpus-per-task=2`` on a 64-core node that gave every worker 64/4
threads ran 16 threads on 2 cores.  What a task may use is the smallest of

- its CPU affinity mask (``os.sched_getaffinity(0)``: SLURM's task/affinity or cgroup
  cpuset, ``taskset``, a container's ``--cpuset-cpus``),
- ``SLURM_CPUS_PER_TASK`` when set (the allocation, also where SLURM does not pin),
- the cgroup CPU quota (``/sys/fs/cgroup/cpu.max``, v1 ``cpu.cfs_quota_us``: a container's
  ``--cpus``), rounded down, at least 1.

All workers on the node for this task compute at once (every backend of a unit, times the
units running at once), so each gets an equal share: frameworks that each spin one thread
per core slow each other down (measured: 2x at batch 32 on 2 cores).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping

from audee.core.errors import AudeeError

CGROUP_ROOT = Path("/sys/fs/cgroup")


def parse_cpu_max(text: str | None) -> float | None:
    """CPUs from a cgroup v2 ``cpu.max`` line (``"200000 100000"`` -> 2.0; ``"max 100000"``,
    empty or unreadable -> None: no quota)."""
    parts = (text or "").split()
    if len(parts) < 1 or parts[0] == "max":
        return None
    try:
        quota = float(parts[0])
        period = float(parts[1]) if len(parts) > 1 else 100000.0
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def read_cgroup_cpus(root: Path = CGROUP_ROOT) -> float | None:
    """The cgroup CPU quota of this process in CPUs, or None (no quota, no cgroup fs).
    Cheap: one small file read (v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``)."""
    try:
        return parse_cpu_max((root / "cpu.max").read_text())
    except OSError:
        pass
    try:
        quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
        period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return parse_cpu_max(f"{quota} {period}") if quota != "-1" else None


def available_cpus(affinity: int | None, cpu_count: int | None, slurm_cpus_per_task: str | None = None,
                   cgroup_cpus: float | None = None) -> int:
    """The CPUs a task may use (pure: every input passed in).  ``affinity``: the size of
    the affinity mask (None where the OS has none); ``cpu_count``: ``os.cpu_count()``;
    ``slurm_cpus_per_task``: the variable's text, if set; ``cgroup_cpus``: the quota in CPUs."""
    cpus = affinity if affinity else (cpu_count or 1)
    if slurm_cpus_per_task is not None and slurm_cpus_per_task.strip():
        try:
            slurm = int(slurm_cpus_per_task.strip())
        except ValueError:
            raise AudeeError(f"expected a positive integer, got {slurm_cpus_per_task!r}",
                             field="SLURM_CPUS_PER_TASK") from None
        if slurm < 1:
            raise AudeeError(f"expected a positive integer, got {slurm_cpus_per_task!r}", field="SLURM_CPUS_PER_TASK")
        cpus = min(cpus, slurm)
    if cgroup_cpus is not None and cgroup_cpus > 0:
        cpus = min(cpus, max(1, math.floor(cgroup_cpus)))
    return max(1, cpus)


def task_cpus(env: Mapping[str, str] | None = None, cgroup_root: Path = CGROUP_ROOT) -> int:
    """:func:`available_cpus` for this process, read from the OS and ``env`` (default: os.environ)."""
    env = os.environ if env is None else env
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        affinity = None
    return available_cpus(affinity, os.cpu_count(), env.get("SLURM_CPUS_PER_TASK"), read_cgroup_cpus(cgroup_root))


def threads_per_worker(cpus: int, workers: int) -> int:
    """Each of ``workers`` workers computing at once gets an equal share of ``cpus``, at least 1."""
    return max(1, cpus // max(1, workers))


def default_parallel_units(cpus: int, backends_per_unit: int, units: int) -> int:
    """Units a shard runs at once by default: one worker set per ``backends_per_unit`` CPUs
    (every worker of a set computes at once), no more than there are units, at least 1.
    On 2 cores with 4 backends: 1 (today's serial shard)."""
    return max(1, min(units, cpus // max(1, backends_per_unit)))
