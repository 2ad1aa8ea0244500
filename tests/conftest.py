"""Suite-wide fixtures.  Worker processes are kept between the tests' pools
(:func:`audee.backends.pool.keep_idle_workers`): most tests start a pool on the same few
frameworks, and importing a framework costs more than the test's own work (5-12 s a worker
on a 2-core machine).  A kept process is renewed for the next pool, as a campaign's slot
reuses its pool across units; a worker started new forks from a zygote that imported its
framework once.  A test that watches a process's own life (its pid, its temp dir, its
restarts) is marked ``fresh_workers``."""
from __future__ import annotations

from typing import Iterator

import pytest

from audee.backends.pool import fresh_workers, keep_idle_workers
from audee.backends.zygote import zygote_registry

#: idle processes kept per test process (pytest-xdist runs two): a pool's three or four
#: frameworks and a plugin or two; each holds a few hundred MB
IDLE_WORKERS = 6


#: zygotes kept per test process (audee/backends/zygote.py), made at a worker's first start:
#: most of the suite's commands (a plugin, a thread count) start once, and fork from the
#: zygote of their framework that another command made
ZYGOTES = 6


@pytest.fixture(scope="session", autouse=True)
def _idle_workers() -> Iterator[None]:
    with zygote_registry(ZYGOTES, eager=True), \
            keep_idle_workers(IDLE_WORKERS, ignore_env=("PYTEST_CURRENT_TEST",)):  # pytest's per-test name
        yield


@pytest.fixture(autouse=True)
def _fresh_workers(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("fresh_workers") is None:
        yield
        return
    with fresh_workers():
        yield
