"""Searches planning with a learned model (`azx.search.AbstractModel` over embeddings):
with a model whose dynamics is the game itself, the native and mctx searches over any
model decide as they do over the environment; with MuZero's networks, the native searches
agree with mctx's on the same model."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _tiers import slow_repeats
from test_search_common import mlp, random_positions

import azx
import azx.muzero as mz
from azx.search import (
    ILLEGAL_LOGIT,
    PUCT,
    AbstractModel,
    Evaluation,
    Gumbel,
    MctxGumbel,
    MctxPUCT,
    PUCTRoot,
    SequentialHalving,
    Transition,
)


BATCH = 8
SIMULATIONS = 24


class ExactModel(AbstractModel):
    """A "learned" model made exact: its embedding IS the game's state (representation:
    identity), its dynamics is the game's step, its prediction a fixed network on the
    state's observation. Written from the game's rules, apart from azx's model code."""

    has_chance = False
    env: azx.envs.AbstractEnv
    net: eqx.Module
    gamma: float = eqx.field(static=True)

    def _predict(self, state):
        logits, value = jax.vmap(self.net)(jax.vmap(self.env.observation)(state))
        legal = jax.vmap(self.env.legal_action_mask)(state)
        terminal = jax.vmap(self.env.terminated)(state) | jax.vmap(self.env.truncated)(state)
        return Evaluation(
            logits=jnp.where(legal, logits, ILLEGAL_LOGIT),
            value=jnp.where(terminal, 0.0, value),
            legal_action_mask=legal,
            terminal=terminal,
        )

    def root(self, state):
        return state, self._predict(state)

    def step(self, state, action, key):
        mover = jax.vmap(self.env.current_player)(state)
        child = jax.vmap(self.env.step)(state, action, key)
        reward = jax.vmap(self.env.rewards)(child)[jnp.arange(action.shape[0]), mover]
        evaluation = self._predict(child)
        turn_passes = jax.vmap(self.env.current_player)(child) != mover
        discount = jnp.where(turn_passes, -self.gamma, self.gamma)
        discount = jnp.where(evaluation.terminal, 0.0, discount).astype(jnp.float32)
        return Transition(state=child, reward=reward, discount=discount, evaluation=evaluation)


def _searches():
    return [
        PUCT(SIMULATIONS),
        Gumbel(SIMULATIONS),
        MctxPUCT(SIMULATIONS),
        MctxGumbel(SIMULATIONS),
    ]


@eqx.filter_jit
def _environment_search(search, net, env, states, key):
    return search(net, env, search.init(env, BATCH), states, key=key)


@eqx.filter_jit
def _model_search(search, model, states, key):
    one_state = jax.tree.map(lambda x: x[0], states)
    tree = search.init_for_states(one_state, model.env.num_actions, BATCH)
    return search.search(model, tree, states, key=key)


# The default run checks native PUCT; the slow tier adds native Gumbel and mctx's two.
@pytest.mark.parametrize(
    "index", slow_repeats(range(4), {1, 2, 3}), ids=["puct", "gumbel", "mctx_puct", "mctx_gumbel"]
)
def test_exact_model_decides_as_the_environment_search(index):
    search = _searches()[index]
    env = azx.envs.make("tic_tac_toe")
    net = mlp(env, seed=1)
    model = ExactModel(env=env, net=net, gamma=1.0)
    for seed in range(2):
        states = random_positions(env, jax.random.key(seed), BATCH, max_moves=5)
        # One key per row: both searches split a batch key into these first (`row_keys`).
        key = jax.random.split(jax.random.key(seed), BATCH)
        expected = _environment_search(search, net, env, states, key)
        got = _model_search(search, model, states, key)
        np.testing.assert_array_equal(np.asarray(got.action), np.asarray(expected.action))
        np.testing.assert_array_equal(
            np.asarray(got.policy_target), np.asarray(expected.policy_target)
        )
        np.testing.assert_array_equal(np.asarray(got.root_value), np.asarray(expected.root_value))


def _learned(two_player, support_size, zero_heads=False):
    net = mz.mlp_net(
        (5,),
        4,
        embedding_size=8,
        width=16,
        support_size=support_size,
        zero_heads=zero_heads,
        key=jax.random.key(3),
    )
    return mz.LearnedModel(net=net, gamma=0.9, two_player=two_player)


def _observations(seed):
    key_obs, key_mask = jax.random.split(jax.random.key(seed))
    observation = jax.random.normal(key_obs, (BATCH, 5))
    legal = jax.random.bernoulli(key_mask, 0.7, (BATCH, 4)).at[:, 0].set(True)
    return mz.Observation(observation=observation, legal_action_mask=legal)


def test_learned_model_root_and_step():
    model = _learned(two_player=True, support_size=4)
    roots = _observations(0)
    embedding, evaluation = model.root(roots)
    assert embedding.shape == (BATCH, 8)
    legal = np.asarray(roots.legal_action_mask)
    assert np.all(np.asarray(evaluation.logits)[~legal] == ILLEGAL_LOGIT)
    logits, value = jax.vmap(model.net.predict)(embedding)
    np.testing.assert_array_equal(np.asarray(evaluation.logits)[legal], np.asarray(logits)[legal])
    np.testing.assert_array_equal(np.asarray(evaluation.value), np.asarray(value))
    action = jnp.arange(BATCH, dtype=jnp.int32) % 4
    step = model.step(embedding, action, jax.random.split(jax.random.key(0), BATCH))
    reward, child = jax.vmap(model.net.step)(embedding, action)
    np.testing.assert_array_equal(np.asarray(step.state), np.asarray(child))
    np.testing.assert_array_equal(np.asarray(step.reward), np.asarray(reward))
    np.testing.assert_array_equal(np.asarray(step.discount), np.full(BATCH, -0.9, np.float32))
    assert np.all(np.asarray(step.evaluation.legal_action_mask))
    assert not np.any(np.asarray(step.evaluation.terminal))
    single = _learned(two_player=False, support_size=None)
    step = single.step(embedding, action, jax.random.split(jax.random.key(0), BATCH))
    np.testing.assert_array_equal(np.asarray(step.discount), np.full(BATCH, 0.9, np.float32))


@eqx.filter_jit
def _native_and_mctx(native, reference, model, roots, key):
    tree = native.init_for_states(jnp.zeros(8), 4, BATCH)
    out = native.search(model, tree, roots, key=key)
    ref = reference.policy_output(model, roots, key)
    return out, out.tree.root_child_visits(), ref


@eqx.filter_jit
def _native_actions(native, model, roots, keys):
    tree = native.init_for_states(jnp.zeros(8), 4, BATCH)
    return jax.vmap(lambda key: native.search(model, tree, roots, key=key).action)(keys)


# The default run checks PUCT on one player and Gumbel on two; the slow tier the other two.
@pytest.mark.parametrize(
    ("algo", "two_player"),
    slow_repeats(
        [("puct", False), ("gumbel", True), ("puct", True), ("gumbel", False)],
        {("puct", True), ("gumbel", False)},
    ),
)
def test_native_search_over_a_learned_model_agrees_with_mctx(algo, two_player):
    model = _learned(two_player, support_size=6)
    if algo == "puct":
        root_policy = PUCTRoot(dirichlet_fraction=0.0, temperature=0.0)
        native = PUCT(SIMULATIONS, gamma=0.9, root_policy=root_policy)
        reference = MctxPUCT(SIMULATIONS, gamma=0.9, root_policy=root_policy)
    else:
        root_policy = SequentialHalving(gumbel_scale=0.0)
        native = Gumbel(SIMULATIONS, gamma=0.9, root_policy=root_policy)
        reference = MctxGumbel(SIMULATIONS, gamma=0.9, root_policy=root_policy)
    for seed in range(2):
        roots = _observations(seed)
        out, visits, ref = _native_and_mctx(native, reference, model, roots, jax.random.key(seed))
        summary = ref.search_tree.summary()
        np.testing.assert_array_equal(np.asarray(visits), np.asarray(summary.visit_counts))
        # Equal trees; the mean values differ by float rounding in the order of the sums,
        # which Gumbel's sigma(completed Q) multiplies by about 7 in the policy target.
        np.testing.assert_allclose(
            np.asarray(out.policy_target), np.asarray(ref.action_weights), atol=1e-3
        )
        np.testing.assert_allclose(
            np.asarray(out.root_value), np.asarray(summary.value), rtol=1e-4, atol=1e-5
        )
        # Illegal root actions are never searched nor chosen.
        legal = np.asarray(roots.legal_action_mask)
        assert np.all(np.asarray(visits)[~legal] == 0)
        assert np.all(legal[np.arange(BATCH), np.asarray(out.action)])


def test_mctx_gumbel_search_refuses_a_model_with_chance():
    """mctx's stochastic policy is PUCT's only, so MctxGumbel refuses a chance model."""
    env = azx.envs.make("2048")
    model = azx.search.ChanceModel(env=env, net=mlp(env, seed=0), gamma=1.0)
    search = MctxGumbel(4)
    with pytest.raises(ValueError, match="no Gumbel variant of its stochastic policy"):
        search.search(model, azx.search.MctxTree(), None, key=jax.random.key(0))


def test_search_over_convolutional_embeddings_agrees_with_mctx():
    env = azx.envs.make("tic_tac_toe")
    net = mz.resnet_net(
        env.observation_shape,
        env.num_actions,
        channels=8,
        num_blocks=1,
        support_size=3,
        key=jax.random.key(4),
    )
    model = mz.LearnedModel(net=net, gamma=1.0, two_player=True)
    states = random_positions(env, jax.random.key(0), BATCH, max_moves=5)
    roots = mz.Observation(
        observation=jax.vmap(env.observation)(states),
        legal_action_mask=jax.vmap(env.legal_action_mask)(states),
    )
    root_policy = SequentialHalving(gumbel_scale=0.0)
    native = Gumbel(SIMULATIONS, root_policy=root_policy)
    reference = MctxGumbel(SIMULATIONS, root_policy=root_policy)

    @eqx.filter_jit
    def run(model, roots, key):
        tree = native.init_for_states(jnp.zeros((8, 3, 3)), env.num_actions, BATCH)
        out = native.search(model, tree, roots, key=key)
        return out, out.tree.root_child_visits(), reference.policy_output(model, roots, key)

    out, visits, ref = run(model, roots, jax.random.key(1))
    np.testing.assert_array_equal(
        np.asarray(visits), np.asarray(ref.search_tree.summary().visit_counts)
    )
    np.testing.assert_array_equal(np.asarray(out.action), np.asarray(ref.action))
    assert out.tree.state.shape == (BATCH, SIMULATIONS + 1, 8, 3, 3)


@pytest.mark.parametrize("zero_heads", [False, True])
def test_search_over_an_untrained_model_with_zero_heads_is_uniform(zero_heads):
    """With the heads started at zero every Q is equal, so Gumbel's improved policy is the
    uniform prior over the legal actions and its actions are uniform draws (mctx, the
    reference, agrees); with random heads neither holds."""
    model = _learned(two_player=False, support_size=6, zero_heads=zero_heads)
    root_policy = SequentialHalving()
    native = Gumbel(SIMULATIONS, gamma=0.9, root_policy=root_policy)
    reference = MctxGumbel(SIMULATIONS, gamma=0.9, root_policy=root_policy)
    roots = _observations(0)
    legal = np.asarray(roots.legal_action_mask)
    uniform = legal / legal.sum(-1, keepdims=True)
    out, _, ref = _native_and_mctx(native, reference, model, roots, jax.random.key(0))
    for target in (out.policy_target, ref.action_weights):
        close = np.allclose(np.asarray(target), uniform, atol=1e-6)
        assert close == zero_heads
    if zero_heads:
        np.testing.assert_array_equal(np.asarray(out.root_value), 0.0)
        # Many searches from one position: each legal action about equally often.
        position = jax.tree.map(lambda x: jnp.repeat(x[:1], BATCH, axis=0), roots)
        keys = jax.random.split(jax.random.key(1), 64)
        actions = _native_actions(native, model, position, keys)
        counts = np.bincount(np.asarray(actions).ravel(), minlength=4)
        expected = legal[0] / legal[0].sum() * actions.size
        assert np.all(counts[~legal[0]] == 0)
        assert np.all(np.abs(counts - expected)[legal[0]] < 5 * np.sqrt(expected[legal[0]]))
