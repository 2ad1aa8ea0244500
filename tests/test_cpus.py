"""How a task's CPUs and GPUs are shared among its backend workers: the CPU count a task
may use (affinity, SLURM, cgroup quota), threads per worker, units a shard runs at once,
and the environment (threads, GPU memory share) a worker would start with."""
from __future__ import annotations

import os

import pytest

from audee.backends.pool import GPU_MEM_FRACTION, Pool, gpu_fractions, worker_env
from audee.backends.registry import gpu_index, parse_backends
from audee.campaign.config import Unit
from audee.campaign.runner import parallel_units
from audee.core.cpus import (available_cpus, default_parallel_units, parse_cpu_max, read_cgroup_cpus, task_cpus,
                        threads_per_worker)
from audee.core.errors import AudeeError
from audee.settings import ShardSettings


@pytest.mark.parametrize("affinity, count, slurm, cgroup, want", [
    (2, 2, None, None, 2),          # this machine, nothing set
    (None, 16, None, None, 16),     # no affinity mask (not Linux): the core count
    (4, 64, None, None, 4),         # taskset/cpuset: the mask, not the node's 64 cores
    (64, 64, "8", None, 8),         # SLURM --cpus-per-task=8 without pinning
    (4, 64, "8", None, 4),          # pinned tighter than the allocation
    (64, 64, None, 2.5, 2),         # docker --cpus=2.5: rounded down
    (64, 64, None, 0.5, 1),         # a fraction of a core: still one thread
    (64, 64, "16", 6.0, 6),         # the least of the three
    (8, 8, " ", None, 8),           # set but empty: ignored
])
def test_available_cpus_is_the_least_of_affinity_slurm_and_quota(affinity, count, slurm, cgroup, want):
    assert available_cpus(affinity, count, slurm, cgroup) == want


@pytest.mark.parametrize("bad", ["two", "0", "-4", "2.5"])
def test_a_garbage_slurm_cpus_per_task_is_a_one_line_error(bad):
    with pytest.raises(AudeeError, match=f"^SLURM_CPUS_PER_TASK: expected a positive integer, got '{bad}'"):
        available_cpus(8, 8, bad)


def test_cgroup_quota_files(tmp_path):
    assert parse_cpu_max("max 100000\n") is None and parse_cpu_max("") is None and parse_cpu_max(None) is None
    assert parse_cpu_max("200000 100000\n") == 2.0 and parse_cpu_max("50000 100000") == 0.5
    assert read_cgroup_cpus(tmp_path) is None                      # no cgroup fs
    (tmp_path / "cpu.max").write_text("300000 100000\n")           # v2
    assert read_cgroup_cpus(tmp_path) == 3.0
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert read_cgroup_cpus(v1) is None                            # v1, no quota
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("150000\n")
    assert read_cgroup_cpus(v1) == 1.5


def test_task_cpus_reads_this_process():
    mask = len(os.sched_getaffinity(0))
    assert task_cpus({}) == available_cpus(mask, os.cpu_count(), None, read_cgroup_cpus())
    assert task_cpus({"SLURM_CPUS_PER_TASK": "1"}) == 1


def test_threads_and_parallel_units_share_the_cpus():
    assert threads_per_worker(16, 4) == 4 and threads_per_worker(16, 4 * 4) == 1 and threads_per_worker(2, 4) == 1
    assert threads_per_worker(16, 3 * 2) == 2 and threads_per_worker(1, 0) == 1
    assert default_parallel_units(2, 4, 10) == 1      # 2 cores, the four backends: serial, as before
    assert default_parallel_units(16, 4, 10) == 4
    assert default_parallel_units(16, 2, 3) == 3      # never more than the units
    assert default_parallel_units(16, 1, 0) == 1
    units = [Unit(f"u{i}", "lenet5", ("tensorflow", "torch", "jax", "onnxruntime")[:n], {})
             for i, n in enumerate((2, 4, 1))]
    assert parallel_units(units, ShardSettings(), 16) == 3    # 16 // 4 (the widest unit), capped at 3 units
    assert parallel_units(units, ShardSettings(), 8) == 2
    assert parallel_units(units, ShardSettings(parallel_units=1), 64) == 1   # given: wins
    assert parallel_units(units[:1], ShardSettings(parallel_units=8), 64) == 1
    assert parallel_units([], ShardSettings(), 64) == 1
    # a converter hosting the Keras backend it converts is one process: NNSmith's pair runs two units on 2 cores
    pair = [Unit(f"p{i}", "lenet5", ("torch", "torch-onnx-ts"), {}) for i in range(3)]
    assert parallel_units(pair, ShardSettings(), 2) == 2
    assert parallel_units(pair, ShardSettings(), 2, device="cuda") == 1   # on a GPU each has its own


def test_pool_threads_divide_the_task_cpus_among_all_workers_at_once(tmp_path):
    refs = parse_backends("tensorflow,torch,jax,onnxruntime")
    threads = lambda pool: {w.threads for w in pool.workers.values()}  # noqa: E731
    assert threads(Pool(refs, tmp_path, cpus=16)) == {4}
    assert threads(Pool(refs, tmp_path, cpus=16, sets=2)) == {2}
    assert threads(Pool(refs, tmp_path, cpus=2)) == {1}
    assert threads(Pool(refs, tmp_path, cpus=16, sets=2, threads=3)) == {3}   # --threads-per-backend wins
    assert threads(Pool(refs[:2], tmp_path)) == {max(1, task_cpus() // 2)}   # nothing given: this task's CPUs


def test_a_worker_env_carries_its_threads_and_gpu_memory_share(tmp_path):
    refs = parse_backends("torch@cuda,jax@cuda,tensorflow@cuda:1,torch,onnxruntime")
    assert gpu_fractions(refs) == {"torch@cuda": 0.5, "jax@cuda": 0.5, "tensorflow@cuda:1": 1.0,
                                   "torch": None, "onnxruntime": None}
    # 2 shards on the node x 2 units at once, 2 GPU workers of a unit on cuda:0: 1/8 each
    pool = Pool(refs, tmp_path, cpus=16, sets=2, shards_per_gpu=2)
    shares = {label: w.gpu_fraction for label, w in pool.workers.items()}
    assert shares == {"torch@cuda": 0.125, "jax@cuda": 0.125, "tensorflow@cuda:1": 0.25,
                      "torch": None, "onnxruntime": None}
    base = {"PATH": "/usr/bin", "PYTHONPATH": "/x"}
    jax = worker_env(pool.workers["jax@cuda"].ref, base, pool.workers["jax@cuda"].threads, 0.125)
    assert jax["AUDEE_THREADS"] == "1"                          # 16 CPUs / (5 workers x 2 sets)
    assert jax["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and jax["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.1250"
    assert jax["TF_FORCE_GPU_ALLOW_GROWTH"] == "true" and jax[GPU_MEM_FRACTION] == "0.1250"
    assert jax["PATH"] == "/usr/bin" and jax["PYTHONPATH"].split(os.pathsep)[0] == "/x"
    cpu = worker_env(pool.workers["torch"].ref, base, 0, None)
    assert not {"AUDEE_THREADS", GPU_MEM_FRACTION, "XLA_PYTHON_CLIENT_MEM_FRACTION",
                "TF_FORCE_GPU_ALLOW_GROWTH"} & set(cpu)        # a CPU worker: no limits, framework threads
    mine = worker_env(pool.workers["torch@cuda"].ref, {**base, GPU_MEM_FRACTION: "0.3"}, 2, 0.125)
    assert mine[GPU_MEM_FRACTION] == mine["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.3"   # the user's share wins


def test_a_torch_gpu_worker_gives_torch_a_device_index_it_takes():
    """torch's ``set_per_process_memory_fraction`` takes an index or an indexed device and
    refuses ``torch.device("cuda")``: every torch@cuda worker once failed to start on a
    GPU.  torch's own check of a device argument (run here on a CPU build) takes what the
    worker passes for each way of naming a GPU."""
    import torch
    from torch.cuda._utils import _get_device_index

    with pytest.raises(ValueError, match="specified index"):
        _get_device_index(torch.device("cuda"))  # what the worker passed
    for device, index in (("cuda", 0), ("cuda:0", 0), ("cuda:1", 1)):
        assert gpu_index(device) == index == _get_device_index(gpu_index(device))
    assert gpu_index("cpu") is None
