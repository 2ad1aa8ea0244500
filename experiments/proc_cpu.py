"""CPU seconds a process has used so far (Linux ``/proc/PID/stat``: user + system, every
thread), for benchmarks that account for each process of a pool side by side."""
from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all its threads) so far; NaN once it is gone.
    The kernel counts in clock ticks (10 ms on most systems): sum over long windows."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / TICKS


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...), from ``/proc``."""
    below: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _parent(int(entry.name))
            if parent is not None:
                below.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in below.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_seconds(pid: int | None = None) -> float:
    """CPU seconds of ``pid`` and every live process below it; for this process (``pid``
    None) also its children already waited for (``RUSAGE_CHILDREN``: a worker that was
    restarted), so a window's difference counts every process that ran in it."""
    import resource

    if pid is None:
        own = resource.getrusage(resource.RUSAGE_SELF)
        done = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime
        pid = os.getpid()
    else:
        total = cpu_seconds(pid)
    return total + sum(c for c in map(cpu_seconds, descendants(pid)) if c == c)  # a process gone meanwhile: NaN
