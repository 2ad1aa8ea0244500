"""A real one-node SLURM for the tests (Debian's slurm-wlm + munge), started and stopped
by PID.  Found on this stack: proctrack/linuxproc, task/none, ReturnToService=2 and a
/run/munge owned by munge start a node in about a second with no cgroup setup."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def unavailable() -> str | None:
    """Why a real SLURM cannot run here (None when it can).  Installs nothing: `make slurm`
    (run by `.ci/run`) installs slurm-wlm and munge beforehand."""
    if os.geteuid() != 0:
        return "needs root to start slurmctld, slurmd and munged"
    missing = [tool for tool in ("slurmctld", "slurmd", "sbatch", "munged", "munge") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not installed (as root on Debian: make slurm)"
    return None


class Cluster:
    def __init__(self, workdir: Path):
        self.dir = Path(workdir)
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.pids: list[Path] = []

    def start(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._munge()
        self.conf.write_text(f"""ClusterName=audeetest
SlurmctldHost={self.host}
SlurmUser=root
SlurmctldPidFile={self.dir}/slurmctld.pid
SlurmdPidFile={self.dir}/slurmd.pid
StateSaveLocation={self.dir}/state
SlurmdSpoolDir={self.dir}/spool
SlurmctldLogFile={self.dir}/log/slurmctld.log
SlurmdLogFile={self.dir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
MailProg=/bin/true
NodeName={self.host} CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=20000 State=UNKNOWN
PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
""")
        subprocess.run(["slurmctld"], env=self.env, check=True, timeout=60)
        self.pids.append(self.dir / "slurmctld.pid")
        subprocess.run(["slurmd"], env=self.env, check=True, timeout=60)
        self.pids.append(self.dir / "slurmd.pid")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True)
            if r.stdout.strip() in ("idle", "mix", "alloc"):
                return
            time.sleep(0.5)
        raise RuntimeError(f"slurm node not idle: {r.stdout!r} {r.stderr!r}")

    def _munge(self) -> None:
        run = Path("/run/munge")
        run.mkdir(parents=True, exist_ok=True)
        shutil.chown(run, "munge", "munge")
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            shutil.chown(key, "munge", "munge")
            key.chmod(0o400)
        if not Path("/run/munge/munged.pid").exists() or subprocess.run(
                ["munge", "-n"], capture_output=True).returncode != 0:
            subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged", "--force"], check=True, timeout=30)
        self.pids.append(Path("/run/munge/munged.pid"))

    def sbatch(self, *args: str, cwd: Path | None = None) -> str:
        r = subprocess.run(["sbatch", "--parsable", *args], env=self.env, capture_output=True, text=True,
                           cwd=cwd, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout.strip().split(";")[0]

    def states(self, job: str) -> dict[str, str] | None:
        """Task id -> state of the job's tasks still queued or running ({}: none left;
        None: squeue itself failed, e.g. slurmctld busy under load: unknown)."""
        r = subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%i %T"], env=self.env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            return None
        return dict(line.split() for line in r.stdout.splitlines() if line.strip())

    def wait(self, job: str, timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while self.states(job) != {} and time.monotonic() < deadline:  # None (squeue failed): keep waiting
            time.sleep(1)
        if self.states(job) != {}:
            raise TimeoutError(f"job {job} still queued or running")

    def stop(self) -> None:
        for pid_file in reversed(self.pids):
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        time.sleep(1)
