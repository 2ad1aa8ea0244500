"""Search: operators keep chromosomes valid; the GA climbs on the real frameworks."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.core.errors import ConfigError
from audee.engine.execute import Executor
from audee.search.config import load_search_config, make_config, parse_duration
from audee.search.encoding import Encoding, cauchy_noise
from audee.search.engine import Search, SearchConfig
from audee.cases.spec import InputSpec
from tests.helpers import tiny_cnn, tiny_inputs

TOKENS = InputSpec("tokens", (6,), "int32", (0, 20))
IMAGE = InputSpec("image", (2, 2, 1), "float32", (0.0, 1.0))


def _encoding(level: str) -> Encoding:
    inputs = {"tokens": np.array([[1, 2, 3, 4, 5, 19]], np.int32), "image": np.full((1, 2, 2, 1), 0.5, np.float32)}
    weights = {"d": [np.ones((3, 2), np.float32), np.zeros(2, np.float32)]}
    return Encoding(level, inputs, weights, [TOKENS, IMAGE])


def _operators_only(cfg: SearchConfig, enc: Encoding) -> Search:
    """A Search with its operators and no backends (generations made, never evaluated)."""
    from deap import base, tools

    search = Search.__new__(Search)
    search.cfg, search.encoding, search.rng = cfg, enc, np.random.default_rng(0)
    search.scales, search.seed_genes = enc.scales(5.0, 5.0), enc.encode()
    search.toolbox = base.Toolbox()
    search.toolbox.register("individual", search._individual)
    search.toolbox.register("mate", search._crossover)
    search.toolbox.register("mutate", search._mutate)
    search.toolbox.register("select", tools.selBest)
    return search


@pytest.mark.parametrize("level", ["input", "weight", "input-weight"])
def test_operators_preserve_shapes_dtypes_and_token_range(level):
    enc = _encoding(level)
    cfg = SearchConfig(level=level, input_scale=5.0, weight_scale=5.0, rng=1, population=6, parents=2,
                       mutation_rate=1.0)
    search = _operators_only(cfg, enc)
    pop = [search._fresh() for _ in range(cfg.population)]
    for _ in range(10):
        for k, ind in enumerate(pop):
            ind.fitness.values = (float(k),)
        pop = search._next_generation(pop, search._draw_generation())
        assert len(pop) == cfg.population
        for child in pop:
            assert child.shape == (enc.size,)
            x, w = enc.inputs_of(child), enc.weights_of(child)
            assert x["tokens"].dtype == np.int32 and x["tokens"].shape == (1, 6)
            assert x["tokens"].min() >= 0 and x["tokens"].max() < 20
            assert x["image"].dtype == np.float32 and x["image"].shape == (1, 2, 2, 1)
            assert [a.shape for a in w["d"]] == [(3, 2), (2,)] and w["d"][0].dtype == np.float32
            assert type(x["image"]) is np.ndarray and type(w["d"][0]) is np.ndarray  # picklable into case files
            if level == "input":
                assert w is enc.base_weights
            if level == "weight":
                np.testing.assert_array_equal(x["tokens"], enc.base_inputs["tokens"])


def test_crossover_takes_genes_from_both_parents():
    enc = _encoding("input")
    search = _operators_only(SearchConfig(crossover_rate=0.5, population=3, parents=2, mutation_rate=0.0), enc)
    a = search._individual(np.zeros(enc.size))
    b = search._individual(np.concatenate([np.full(6, 7.0), np.ones(4)]))
    worst = search._individual(np.full(enc.size, 3.0))
    a.fitness.values, b.fitness.values, worst.fitness.values = (2.0,), (1.0,), (0.0,)
    (draw,) = search._draw_generation()
    assert draw.cauchy is None and sorted(draw.pick) == [0, 1]
    child = search._next_generation([worst, a, b], [draw])[-1]
    assert set(np.unique(child[:6])) == {0.0, 7.0}


def test_cauchy_noise_is_heavy_tailed_and_scaled():
    rng = np.random.default_rng(0)
    noise = cauchy_noise(rng, np.full(100_000, 0.1))
    assert 0.05 < np.median(np.abs(noise)) < 0.15   # median |Cauchy| = scale
    assert np.abs(noise).max() > 100                # heavy tail, unlike a Gaussian


def test_config_file_errors_name_file_and_field(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("population: many\n")
    with pytest.raises(ConfigError, match=r"s.yaml: population: expected an integer"):
        load_search_config(p)
    p.write_text("populaton: 3\n")
    with pytest.raises(ConfigError, match=r"s.yaml: populaton: unknown setting"):
        load_search_config(p)
    p.write_text("parents: 30\npopulation: 10\n")
    with pytest.raises(ConfigError, match=r"parents: must be between"):
        make_config(load_search_config(p), {}, str(p))
    assert parse_duration("5m") == 300 and parse_duration("300s") == 300 and parse_duration(12) == 12


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends("tensorflow,jax"), tmp_path_factory.mktemp("logs")) as p:
        assert p.start() == {}
        yield p


def _case(ex: Executor) -> TestCase:
    case = TestCase("tiny-seed", tiny_cnn(), {}, tiny_inputs(1))
    ex.complete_weights(case, 0)
    return case


def test_ga_raises_inconsistency_fitness_across_generations(pool):
    ex = Executor(pool)
    # 16 generations: with oneDNN's AVX2 kernels the first 8 of this draw find no pair further apart
    cfg = SearchConfig(level="input", fitness="inconsistency", population=12, parents=4, max_iter=16,
                       budget_s=120, input_scale=0.5, rng=0)
    out = Search(ex, _case(ex), cfg, pool.labels, lambda r: r.case.id, "t").run()
    best = [t["best"] for t in out.trace]
    assert out.generations == 16 and out.evaluations >= 12
    assert all(b2 >= b1 for b1, b2 in zip(best, best[1:]))  # elitism: never worse
    assert best[-1] > best[0]
    assert set(out.trace[-1]["layers"]) == {"conv", "pool", "flat", "logits", "softmax"}


def test_the_same_rng_gives_the_same_search(pool):
    """The next generation's draws are made on a thread while the backends compute: in
    a fixed order, so a seed still gives one search."""
    ex = Executor(pool)
    cfg = SearchConfig(level="input", fitness="inconsistency", population=8, parents=3, max_iter=5,
                       budget_s=120, input_scale=0.5, rng=3)
    runs = [Search(ex, _case(ex), cfg, pool.labels, profile_layers=False).run() for _ in range(2)]
    assert [(t["best"], t["mean"], t["pair"]) for t in runs[0].trace] == \
           [(t["best"], t["mean"], t["pair"]) for t in runs[1].trace]
    other = Search(ex, _case(ex), SearchConfig(**{**cfg.__dict__, "rng": 4}), pool.labels,
                   profile_layers=False).run()
    assert [t["mean"] for t in other.trace] != [t["mean"] for t in runs[0].trace]


def test_weight_level_swaps_weights_and_reaches_nan(pool):
    ex = Executor(pool)
    cfg = SearchConfig(level="weight", fitness="nan", population=8, parents=3, max_iter=200, budget_s=120,
                       relative_scale=1.0, stop_at_first=True, rng=0, nan_backend="tensorflow")
    found = []
    out = Search(ex, _case(ex), cfg, pool.labels, lambda r: found.append(r) or r.case.id, "w").run()
    assert out.failures, out.trace[-1]
    assert any(f.kind == "nan" for f in found[0].verdict.findings)
    assert out.first_failure_s is not None and out.first_failure_s <= out.seconds


class CountingExecutor(Executor):
    """An Executor that counts full oracle runs (the confirmation of suspects)."""

    runs = 0

    def run(self, case):
        self.runs += 1
        return super().run(case)


def test_search_without_recording_or_profiles_confirms_and_writes_nothing(tmp_path):
    """Amplification only (localization's use): explicit constructor options, no patching.
    The NaN fitness drives the weights to NaN, and no suspect is confirmed or recorded."""
    with Pool(parse_backends("tensorflow"), tmp_path / "logs") as tf_pool:
        assert tf_pool.start() == {}
        ex = CountingExecutor(tf_pool)
        case = _case(ex)
        cfg = SearchConfig(level="weight", fitness="nan", population=8, parents=3, max_iter=200, budget_s=120,
                           relative_scale=1.0, stop_at_first=True, rng=0)
        ex.runs = 0
        out = Search(ex, case, cfg, tf_pool.labels, profile_layers=False).run()
        assert out.best_fitness >= 1e300                # a NaN was reached: it would have been a suspect
        assert out.failures == [] and out.first_failure_s is None and ex.runs == 0
        assert out.generations == 200                   # stop_at_first never fires: nothing is recorded
        assert all(t["layers"] == {} for t in out.trace)
        # the same search with the defaults records the failure and profiles the best individual
        found = []
        out = Search(ex, case, cfg, tf_pool.labels, lambda r: found.append(r) or r.case.id, "w").run()
        assert out.failures and ex.runs >= 1 and out.trace[-1]["layers"]
