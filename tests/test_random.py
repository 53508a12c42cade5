"""`azx._random.gamma` against the Gamma distribution itself (scipy's CDF, which jax
requires), in both of its regimes and with its extra rounds of proposals exercised."""

import jax
import numpy as np
import pytest
import scipy.stats

from azx import _random


def _samples(alpha, proposals=_random.GAMMA_PROPOSALS, rows=4000, seed=0):
    # As the PUCT search draws them: one key per row, seven samples a row.
    keys = jax.random.split(jax.random.key(seed), rows)
    draw = jax.jit(jax.vmap(lambda k: _random.gamma(k, alpha, (7,), proposals)))
    return np.asarray(draw(keys)).ravel()


@pytest.mark.parametrize("alpha", [0.03, 0.3, 1.0, 2.5, 40.0])
def test_gamma_follows_the_gamma_distribution(alpha):
    x = _samples(alpha)
    assert x.shape == (28000,)
    assert np.all(np.isfinite(x)) and np.all(x >= 0)
    # Kolmogorov-Smirnov against the exact CDF; at this sample size a wrong shape (say
    # alpha off by 3%) gives p-values far below 1e-3. Float32 cannot hold the smallest
    # samples (at alpha = 0.03, 7% of the mass lies below its smallest normal number):
    # their share is checked on its own, the rest against the CDF above that number.
    cdf = scipy.stats.gamma(alpha).cdf
    tiny = np.finfo(np.float32).tiny
    below, p = x < tiny, cdf(tiny)
    assert abs(below.mean() - p) <= 5 * np.sqrt(p * (1 - p) / x.size)
    rest = x[~below].astype(np.float64)
    assert scipy.stats.kstest(rest, lambda v: (cdf(v) - p) / (1 - p)).pvalue > 1e-3
    # Mean and variance are both alpha: within five standard errors.
    n = x.size
    assert abs(x.mean() - alpha) < 5 * np.sqrt(alpha / n)
    # The variance of the sample variance is (mu_4 - sigma^4) / n = (2 alpha^2 + 6 alpha) / n.
    assert abs(x.var() - alpha) < 5 * np.sqrt((2 * alpha**2 + 6 * alpha) / n)


def test_gamma_extra_rounds_keep_the_distribution():
    # One proposal at a time: at alpha = 0.3, 3% of the samples need a second round, and
    # some a third, which is the path that four proposals almost never take.
    x = _samples(0.3, proposals=1, rows=8000, seed=1)
    assert scipy.stats.kstest(x, scipy.stats.gamma(0.3).cdf).pvalue > 1e-3


def test_gamma_is_a_function_of_its_key():
    key = jax.random.key(7)
    a = _random.gamma(key, 0.3, (3, 5))
    b = _random.gamma(key, 0.3, (3, 5))
    c = _random.gamma(jax.random.key(8), 0.3, (3, 5))
    assert a.shape == (3, 5)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan")])
def test_gamma_rejects_a_shape_that_is_not_positive(alpha):
    with pytest.raises(ValueError, match="alpha must be positive"):
        _random.gamma(jax.random.key(0), alpha, (2,))


def test_gamma_needs_a_proposal():
    with pytest.raises(ValueError, match="proposals must be at least 1, got 0"):
        _random.gamma(jax.random.key(0), 0.3, (2,), proposals=0)
