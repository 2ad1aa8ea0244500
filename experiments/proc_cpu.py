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
