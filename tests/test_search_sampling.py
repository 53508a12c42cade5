"""The searches' randomness against the distributions it must follow: PUCT's root noise
against the Dirichlet distribution's marginals, its sampled actions against
`visits ** (1 / temperature)`, and Gumbel's root perturbation against the Gumbel
distribution, each with a test of fit from scipy."""

import jax
import numpy as np
import pytest
import scipy.stats
from test_search_common import play, search_uniform

import azx
from azx.search import PUCT, Gumbel, PUCTRoot, SequentialHalving


ROWS = 3000


@pytest.mark.parametrize("alpha", [0.3, 2.0])
def test_puct_root_noise_follows_the_dirichlet_distribution(alpha):
    # With the noise's whole weight and a uniform network, the root's stored prior is the
    # noise itself: Dirichlet(alpha) over the legal actions, whose marginals are
    # Beta(alpha, (n - 1) * alpha). Here 5 of tic-tac-toe's 9 cells are free. (At this
    # size an alpha of 0.33 in place of 0.3 fails the test.)
    env = azx.envs.make("tic_tac_toe")
    moves = [0, 4, 8, 2]
    search = PUCT(1, root_policy=PUCTRoot(dirichlet_alpha=alpha, dirichlet_fraction=1.0))
    out = search_uniform(search, env, play(env, [moves] * ROWS), jax.random.key(1))
    prior = np.asarray(out.tree.selection_prior[:, 0], np.float64)
    legal = np.ones(9, bool)
    legal[moves] = False
    assert np.all(prior[:, ~legal] == -np.inf)
    np.testing.assert_allclose(prior[:, legal].sum(axis=1), 1.0, rtol=1e-5)
    # One component per row (rows are independent, a row's components are not).
    free = np.flatnonzero(legal)
    component = prior[np.arange(ROWS), free[np.arange(ROWS) % free.size]]
    marginal = scipy.stats.beta(alpha, (free.size - 1) * alpha)
    assert scipy.stats.kstest(component, marginal.cdf).pvalue > 1e-3
    # Rows draw different noise.
    assert np.unique(prior[:, free[0]]).size > ROWS * 0.99


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_puct_samples_actions_by_their_visits(temperature):
    # Without noise every row searches the same position alike, so all rows share one
    # policy target, and their actions are draws from visits ** (1 / temperature). O must
    # block at 2: the visits (14 there, 2 on each other free cell) are uneven enough that
    # a temperature of 0.8 or 1.25 in place of 1 fails this test by a wide margin.
    env = azx.envs.make("tic_tac_toe")
    search = PUCT(24, root_policy=PUCTRoot(dirichlet_fraction=0.0, temperature=temperature))
    out = search_uniform(search, env, play(env, [[0, 3, 1]] * ROWS), jax.random.key(2))
    target = np.asarray(out.policy_target)
    np.testing.assert_array_equal(target, np.broadcast_to(target[0], target.shape))
    assert target[0].max() > 2 * np.sort(target[0])[-2]
    weights = target[0].astype(np.float64) ** (1.0 / temperature)
    expected = weights / weights.sum()
    counts = np.bincount(np.asarray(out.action), minlength=9)
    assert counts[expected == 0].sum() == 0  # never an unvisited (or illegal) action
    seen = expected > 0
    assert seen.sum() >= 3
    chi2 = scipy.stats.chisquare(counts[seen], ROWS * expected[seen])
    assert chi2.pvalue > 1e-3


def test_gumbel_root_noise_follows_the_gumbel_distribution():
    # With one simulation and every action considered, Gumbel-top-k visits the action with
    # the largest `gumbel + logits`; with equal logits over n legal actions that is each
    # action with probability 1 / n, independently per row.
    env = azx.envs.make("tic_tac_toe")
    search = Gumbel(1, root_policy=SequentialHalving(max_num_considered_actions=9))
    out = search_uniform(search, env, play(env, [[4]] * ROWS), jax.random.key(3))
    visited = np.asarray(out.tree.root_child_visits()).argmax(axis=1)
    counts = np.bincount(visited, minlength=9)
    assert counts[4] == 0
    legal = np.arange(9) != 4
    assert scipy.stats.chisquare(counts[legal]).pvalue > 1e-3
