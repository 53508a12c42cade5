"""PPO against independent references: GAE against a Python loop, the loss against a hand
computation, the GRU against its equations in NumPy, a rollout's bookkeeping against a
scripted environment, minibatches that use every sample once, and memory that only a
recurrent network has."""

import equinox as eqx
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from _games import Countdown
from _tiers import slow_repeats

import azx


# ----------------------------------------------------------------------------- GAE


def _gae_loop(reward, value, next_value, terminated, truncated, gamma, lam, truncation):
    steps, batch = reward.shape
    advantage = np.zeros((steps, batch))
    for b in range(batch):
        later = 0.0
        for t in reversed(range(steps)):
            ended = terminated[t, b] or truncated[t, b]
            no_future = terminated[t, b] or (truncation == "terminate" and truncated[t, b])
            bootstrap = 0.0 if no_future else next_value[t, b]
            delta = reward[t, b] + gamma * bootstrap - value[t, b]
            later = delta + (0.0 if ended else gamma * lam * later)
            advantage[t, b] = later
    return advantage, advantage + value


@pytest.mark.parametrize("truncation", ["bootstrap", "terminate"])
def test_gae_matches_a_python_loop(truncation):
    rng = np.random.default_rng(0)
    steps, batch = 9, 5
    reward, value, next_value = (
        rng.normal(size=(steps, batch)).astype(np.float32) for _ in range(3)
    )
    ends = rng.integers(0, 4, size=(steps, batch))
    terminated, truncated = ends == 1, ends == 2
    terminated[-1, 0], truncated[-1, 1] = True, True  # the last step ends episodes too
    expected = _gae_loop(reward, value, next_value, terminated, truncated, 0.9, 0.8, truncation)
    got = azx.ppo.gae(
        *map(jnp.asarray, (reward, value, next_value, terminated, truncated)),
        gamma=0.9,
        gae_lambda=0.8,
        truncation=truncation,
    )
    for x, y in zip(got, expected):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


def test_gae_truncation_modes_differ_only_through_the_bootstrap():
    args = [jnp.ones((3, 1)), jnp.zeros((3, 1)), jnp.full((3, 1), 10.0)]
    ended = [jnp.zeros((3, 1), bool), jnp.array([[False], [True], [False]])]
    boot, _ = azx.ppo.gae(*args, *ended, gamma=0.5, gae_lambda=1.0)
    term, _ = azx.ppo.gae(*args, *ended, gamma=0.5, gae_lambda=1.0, truncation="terminate")
    # Step 1 was truncated: with the bootstrap its TD error is 1 + 0.5 * 10, without it 1.
    assert float(boot[1, 0]) == 6.0 and float(term[1, 0]) == 1.0
    # Step 0 (TD error 1 + 0.5 * 10) adds gamma * lambda times step 1's advantage; step 2
    # belongs to the next episode, so step 1 adds nothing of it.
    assert float(boot[0, 0]) == 6.0 + 0.5 * 6.0 and float(term[0, 0]) == 6.0 + 0.5 * 1.0
    assert float(boot[2, 0]) == float(term[2, 0]) == 6.0


# ----------------------------------------------------------------------------- the loss


def test_loss_matches_a_hand_computation():
    # Five samples: a ratio inside the clip range; above it with a positive advantage
    # (clipped); below it with a negative advantage (clipped); below it with a positive
    # advantage and above it with a negative one (both unclipped: min picks the ratio).
    ratio = np.array([1.1, 1.5, 0.5, 0.5, 1.5])
    advantage = np.array([2.0, 1.0, -1.0, 3.0, -2.0])
    old_log_prob = np.array([-1.0, -0.5, -2.0, -0.3, -1.2])
    log_prob = old_log_prob + np.log(ratio)
    old_value = np.array([0.5, 0.5, 0.0, 1.0, 0.0])
    value = np.array([1.0, 0.6, 0.0, 1.0, -1.0])  # the first and last move past ±0.2
    target = np.array([2.0, 2.0, 1.0, 0.0, 1.0])
    entropy = np.array([0.6, 0.5, 0.4, 0.3, 0.2])
    weight = np.full(5, 0.2)

    policy = [-1.1 * 2.0, -1.2 * 1.0, -(0.8 * -1.0), -(0.5 * 3.0), -(1.5 * -2.0)]
    # Value clip 0.2: sample 0's clipped prediction 0.7 is further from the target (binds);
    # sample 4's clipped prediction -0.2 is nearer the target than -1 (does not bind).
    value_error = [(0.7 - 2.0) ** 2, (0.6 - 2.0) ** 2, 1.0, 1.0, (-1.0 - 1.0) ** 2]
    expected_policy = np.mean(policy)
    expected_value = 0.5 * np.mean(value_error)
    expected_kl = np.mean((ratio - 1) - np.log(ratio))

    def parts_of(log_prob):
        return azx.ppo.loss(
            log_prob,
            *(
                jnp.asarray(x, jnp.float32)
                for x in (old_log_prob, advantage, value, old_value, target, entropy, weight)
            ),
            clip_eps=0.2,
            value_clip_eps=0.2,
            value_coef=0.5,
            entropy_coef=0.01,
        )

    parts = parts_of(jnp.asarray(log_prob, jnp.float32))
    np.testing.assert_allclose(parts.policy_loss, expected_policy, rtol=1e-5)
    np.testing.assert_allclose(parts.value_loss, expected_value, rtol=1e-5)
    np.testing.assert_allclose(parts.entropy, np.mean(entropy), rtol=1e-5)
    np.testing.assert_allclose(parts.approx_kl, expected_kl, rtol=1e-4)
    np.testing.assert_allclose(parts.clip_fraction, 4 / 5, rtol=1e-6)
    np.testing.assert_allclose(
        parts.loss, expected_policy + 0.5 * expected_value - 0.01 * np.mean(entropy), rtol=1e-5
    )
    # Where the clip binds, the policy gradient vanishes; elsewhere it is
    # -weight * ratio * advantage (d ratio / d log_prob = ratio).
    grad = jax.grad(lambda lp: parts_of(lp).policy_loss)(jnp.asarray(log_prob, jnp.float32))
    expected_grad = -0.2 * ratio * advantage * np.array([1, 0, 0, 1, 1])
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-5, atol=1e-7)


def test_unclipped_value_loss_is_half_the_squared_error():
    parts = azx.ppo.loss(
        *(jnp.zeros(2) for _ in range(3)),
        jnp.array([1.0, 3.0]),
        jnp.zeros(2),
        jnp.array([0.0, 1.0]),
        jnp.zeros(2),
        jnp.full(2, 0.5),
        clip_eps=0.2,
        value_clip_eps=None,
        value_coef=1.0,
        entropy_coef=0.0,
    )
    np.testing.assert_allclose(parts.value_loss, 0.5 * (1.0 + 4.0) / 2)


# ----------------------------------------------------------------------------- the GRU


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gru_numpy(cell, x, h):
    w_ih, w_hh = np.asarray(cell.weight_ih, np.float64), np.asarray(cell.weight_hh, np.float64)
    b, b_n = np.asarray(cell.bias, np.float64), np.asarray(cell.bias_n, np.float64)
    n = h.shape[0]
    r = _sigmoid(w_ih[:n] @ x + b[:n] + w_hh[:n] @ h)
    z = _sigmoid(w_ih[n : 2 * n] @ x + b[n : 2 * n] + w_hh[n : 2 * n] @ h)
    candidate = np.tanh(w_ih[2 * n :] @ x + b[2 * n :] + r * (w_hh[2 * n :] @ h + b_n))
    return (1.0 - z) * candidate + z * h


def _randomised(net, key):
    # Non-zero biases everywhere, so that every term of the equations is exercised.
    leaves, treedef = jax.tree.flatten(net)
    keys = jax.random.split(key, len(leaves))
    leaves = [
        leaf + 0.3 * jax.random.normal(k, leaf.shape) if eqx.is_inexact_array(leaf) else leaf
        for leaf, k in zip(leaves, keys)
    ]
    return jax.tree.unflatten(treedef, leaves)


def test_gru_stack_matches_its_equations_in_numpy():
    net = azx.nets.RecurrentActorCritic(
        (5,), 3, hidden_size=6, num_layers=2, head_size=4, key=jax.random.key(0)
    )
    net = eqx.filter_jit(_randomised)(net, jax.random.key(1))
    carry = np.asarray(jax.random.normal(jax.random.key(2), (2, 6)), np.float64)
    observation = jax.random.normal(jax.random.key(3), (5,))
    inputs = azx.nets.RecurrentInput(observation, jnp.int32(2), jnp.float32(0.7), jnp.bool_(False))
    new_carry, (logits, value) = eqx.filter_jit(net)(jnp.asarray(carry, jnp.float32), inputs)

    x = np.concatenate(
        [
            np.asarray(net.encoder(observation), np.float64),
            np.asarray(net.action_embedding.weight[2], np.float64),
            [0.7],
        ]
    )
    h0 = _gru_numpy(net.cells[0], x, carry[0])
    h1 = _gru_numpy(net.cells[1], h0, carry[1])
    np.testing.assert_allclose(new_carry, np.stack([h0, h1]), rtol=1e-5, atol=1e-5)
    # The heads read the sum of the layers' outputs.
    features = jnp.asarray(h0 + h1, jnp.float32)
    np.testing.assert_allclose(logits, net.policy_head(features), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, net.value_head(features)[0], rtol=1e-5, atol=1e-6)


def _sequence(length, start_at, observation_size=5, num_actions=3):
    keys = jax.random.split(jax.random.key(4), 3)
    return azx.nets.RecurrentInput(
        observation=jax.random.normal(keys[0], (length, observation_size)),
        previous_action=jax.random.randint(keys[1], (length,), 0, num_actions),
        previous_reward=jax.random.normal(keys[2], (length,)),
        episode_start=jnp.arange(length) == start_at,
    )


@pytest.mark.parametrize("reset", [True, False])
def test_an_episode_start_resets_memory_to_a_fresh_start(reset):
    net = azx.nets.RecurrentActorCritic(
        (5,), 3, hidden_size=8, num_layers=2, reset_at_episode_start=reset, key=jax.random.key(0)
    )
    inputs, k = _sequence(10, start_at=4), 4
    carry = jax.random.normal(jax.random.key(5), net.initial_carry().shape)
    _, (logits, values) = jax.lax.scan(lambda c, x: net(c, x), carry, inputs)
    # From step k on: the same inputs from a zero carry, with no previous action or reward.
    fresh = jax.tree.map(lambda x: x[k:], inputs)
    fresh = eqx.tree_at(
        lambda i: (i.previous_action, i.previous_reward),
        fresh,
        (fresh.previous_action.at[0].set(0), fresh.previous_reward.at[0].set(0.0)),
    )
    _, (fresh_logits, fresh_values) = jax.lax.scan(
        lambda c, x: net(c, x), net.initial_carry(), fresh
    )
    if reset:
        np.testing.assert_allclose(logits[k:], fresh_logits, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(values[k:], fresh_values, rtol=1e-6, atol=1e-7)
    else:
        assert not np.allclose(values[k:], fresh_values, atol=1e-4)


# ----------------------------------------------------------------------------- rollouts


def _trainer(env, net_kind="ff", **config):
    defaults = dict(num_envs=8, rollout_length=12, num_epochs=2, num_minibatches=4)
    trainer = azx.ppo.PPO(env, azx.ppo.Config(**(defaults | config)))
    if net_kind == "ff":
        net = azx.nets.ActorCritic(
            env.observation_shape, env.num_actions, hidden_sizes=(16,), key=jax.random.key(0)
        )
    else:
        net = azx.nets.RecurrentActorCritic(
            env.observation_shape, env.num_actions, hidden_size=8, head_size=8,
            key=jax.random.key(0),
        )  # fmt: skip
    return trainer, trainer.init(net, key=jax.random.key(1))


def test_rollout_resets_ended_episodes_and_keeps_their_final_value():
    env = Countdown(max_length=6, limit=4)
    trainer, state = _trainer(env)
    state, rollout = eqx.filter_jit(trainer.rollout)(state, jax.random.key(2))
    t = jax.tree.map(np.asarray, rollout.trajectory)
    steps, rows = t.reward.shape
    episodes = returns = 0
    for row in range(rows):
        expected_time = 0
        for step in range(steps):
            time, length = t.observation[step, row]
            assert time == expected_time and 1 <= length <= 6
            assert t.episode_start[step, row] == (time == 0)
            assert t.reward[step, row] == time + 1
            assert t.action[step, row] != time % 3  # the illegal action is never taken
            assert t.terminated[step, row] == (time + 1 == length)
            assert t.truncated[step, row] == (time + 1 == 4 and length > 4)
            if step:  # the inputs a recurrent policy reads: the step before
                assert t.previous_action[step, row] == t.action[step - 1, row]
                assert t.previous_reward[step, row] == t.reward[step - 1, row]
            if t.truncated[step, row]:
                final = jnp.array([4.0, length])
                np.testing.assert_allclose(t.final_value[step, row], state.net(final)[1], rtol=1e-5)
            else:
                assert t.final_value[step, row] == 0.0
            ended = t.terminated[step, row] or t.truncated[step, row]
            if ended:
                episodes += 1
                returns += (time + 1) * (time + 2) / 2
            expected_time = 0 if ended else expected_time + 1
    assert t.truncated.any() and t.terminated.any()
    assert int(rollout.episodes) == episodes
    np.testing.assert_allclose(rollout.return_sum, returns)
    # The state continues where the rollout stopped.
    np.testing.assert_array_equal(state.previous_action, t.action[-1])


# The slow tier repeats the check with the recurrent network.
@pytest.mark.parametrize("net_kind", slow_repeats(["ff", "recurrent"], {"recurrent"}))
def test_first_minibatch_recomputes_the_rollout_log_probs(net_kind):
    trainer, state = _trainer(Countdown(), net_kind, normalize_observations=True)

    @eqx.filter_jit
    def first_minibatch(state):
        # Train a little first, so that the memory and the statistics are not trivial.
        state = trainer.train(state, 2)
        state, rollout = trainer.rollout(state, jax.random.key(3))
        advantage, target = trainer.advantages(rollout)
        batches = trainer.minibatches(state, rollout, advantage, target, jax.random.key(4))
        first = jax.tree.map(lambda x: x[0], batches)
        return first, trainer.policy_and_value(state.net, first, state.observation_stats)

    first, (logits, value) = first_minibatch(state)
    log_policy = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_policy, first.action[..., None], -1)[..., 0]
    np.testing.assert_allclose(log_prob, first.log_prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, first.value, rtol=1e-5, atol=1e-5)


def test_the_learner_runs_a_feed_forward_network_as_plain_matrix_products():
    # One vmap over a minibatch's envs x steps samples: every layer's product is then a
    # matrix product of rank-2 operands. A vmap over both axes gives rank-3 products,
    # which XLA:CPU computes feature-major and transposes back, forward and backward (on
    # CartPole's PPO about a third more learner time).
    trainer, state = _trainer(Countdown(), truncation="bootstrap")
    _, rollout = eqx.filter_jit(trainer.rollout)(state, jax.random.key(2))
    advantage, target = trainer.advantages(rollout)
    batches = trainer.minibatches(state, rollout, advantage, target, jax.random.key(3))
    first = jax.tree.map(lambda x: x[0], batches)

    def learner(params):
        net = eqx.combine(params, state.net_static)
        logits, value = trainer.policy_and_value(net, first, None)
        return jnp.sum(logits) + jnp.sum(value)

    def ranks(jaxpr):
        for equation in jaxpr.eqns:
            if equation.primitive.name == "dot_general":
                yield max(len(v.aval.shape) for v in equation.invars)
        for sub in jax.extend.core.subjaxprs(jaxpr):
            yield from ranks(sub)

    forward_and_backward = jax.make_jaxpr(jax.grad(learner))(state.params).jaxpr
    rollout_jaxpr = jax.make_jaxpr(trainer.rollout)(state, jax.random.key(2)).jaxpr
    for jaxpr in (forward_and_backward, rollout_jaxpr):
        found = list(ranks(jaxpr))
        assert found and max(found) == 2, found


def test_the_rollout_reads_linear_weights_through_copies_transposed_once():
    # An eqx.nn.Linear stores [out, in]: read as it is, every step's product transposes it
    # again (XLA:CPU's kernels take the other layout). The rollout's loop reads each weight
    # as the transpose of a copy made before the loop behind an optimisation barrier, a
    # transpose that XLA folds into the product.
    trainer, state = _trainer(Countdown())
    outer = jax.make_jaxpr(trainer.rollout)(state, jax.random.key(2)).jaxpr
    (loop,) = [e for e in outer.eqns if e.primitive.name == "scan" and e.params["length"] == 12]
    barriers = [e for e in outer.eqns if e.primitive.name == "optimization_barrier"]
    copies = {id(v) for e in barriers for v in e.outvars}
    body = loop.params["jaxpr"].jaxpr
    from_copies = {
        id(body.invars[i]) for i, v in enumerate(loop.invars) if id(v) in copies
    }  # fmt: skip
    transposed = {
        id(e.outvars[0])
        for e in body.eqns
        if e.primitive.name == "transpose" and id(e.invars[0]) in from_copies
    }
    products = [e for e in body.eqns if e.primitive.name == "dot_general"]
    linears = [
        layer
        for layer in jax.tree.leaves(state.net, is_leaf=lambda x: isinstance(x, eqx.nn.Linear))
        if isinstance(layer, eqx.nn.Linear)
    ]
    assert len(products) == len(linears) == len(transposed) == 4
    assert all(id(e.invars[0]) in transposed for e in products)


@pytest.mark.parametrize("net_kind", ["ff", "recurrent"])
def test_every_sample_is_used_once_per_epoch(net_kind):
    trainer, state = _trainer(Countdown(), net_kind)

    @eqx.filter_jit
    def epoch(state):
        _, rollout = trainer.rollout(state, jax.random.key(2))
        steps, rows = rollout.trajectory.reward.shape
        ids = jnp.arange(steps * rows, dtype=jnp.float32).reshape(steps, rows)
        return rollout, trainer.minibatches(state, rollout, ids, -ids, jax.random.key(5))

    rollout, batches = epoch(state)
    steps, rows = rollout.trajectory.reward.shape
    used = np.sort(np.asarray(batches.advantage).reshape(-1))
    np.testing.assert_array_equal(used, np.arange(steps * rows))
    # The targets travel with their samples, and so do the steps themselves.
    np.testing.assert_array_equal(batches.target, -batches.advantage)
    flat = np.asarray(rollout.trajectory.observation)
    index = np.asarray(batches.advantage, int)
    np.testing.assert_array_equal(batches.observation, flat[index // rows, index % rows])
    per_minibatch = steps * rows // trainer.config.num_minibatches
    assert batches.advantage[0].size == per_minibatch
    if net_kind == "recurrent":  # whole sequences, with their starting memory
        order = index[:, :, 0] % rows
        np.testing.assert_array_equal(index, order[..., None] + rows * np.arange(steps))
        np.testing.assert_array_equal(batches.start_carry, np.asarray(state.carry)[order])


def test_train_is_deterministic_and_compiles_once():
    trainer, state = _trainer(Countdown(), "recurrent")
    train = eqx.debug.assert_max_traces(trainer.train, max_traces=1)
    train = eqx.filter_jit(train)
    a = train(state, 3)
    b = train(state, 3)
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        np.testing.assert_array_equal(x, y)
    assert int(a.iteration) == 3 and int(a.metrics.episodes) > 0
    assert not all(
        np.array_equal(x, y)
        for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(state.params))
    )


# ----------------------------------------------------------------------------- learning


@pytest.mark.slow
def test_memory_needs_a_recurrent_network():
    """The cue is shown only at the first step: the recurrent network learns to answer it,
    while the feed-forward one stays at chance (1 in 2)."""
    env = azx.envs.CueMemory(num_cues=2, delay=4)
    config = azx.ppo.Config(
        num_envs=32, rollout_length=16, learning_rate=3e-3, anneal_iterations=60
    )
    trainer = azx.ppo.PPO(env, config)
    nets = {
        "recurrent": azx.nets.RecurrentActorCritic(
            env.observation_shape, 2, hidden_size=32, head_size=32, key=jax.random.key(0)
        ),
        "ff": azx.nets.ActorCritic(env.observation_shape, 2, key=jax.random.key(0)),
    }
    success = {}
    for kind, net in nets.items():
        state = eqx.filter_jit(trainer.train)(trainer.init(net, key=jax.random.key(1)), 60)
        result = eqx.filter_jit(azx.ppo.evaluate)(
            env, state.net, num_episodes=1000, key=jax.random.key(2), greedy=True
        )
        assert bool(result.finished.all())
        success[kind] = float(result.returns.mean())
    assert success["recurrent"] >= 0.9, success
    # Chance is 0.5: 1000 episodes put a memoryless policy within 0.5 ± 0.05.
    assert abs(success["ff"] - 0.5) < 0.05, success


# ----------------------------------------------------------------------------- bad input


def test_bad_configurations_name_the_value_and_what_is_allowed():
    with pytest.raises(ValueError, match=r"num_minibatches \(5\) must divide rollout_length"):
        _trainer(Countdown(), num_minibatches=5)
    with pytest.raises(
        ValueError, match=r"recurrent.*num_minibatches \(3\) must divide num_envs \(8\).*1, 2, 4, 8"
    ):
        _trainer(Countdown(), "recurrent", num_minibatches=3, rollout_length=12)
    with pytest.raises(ValueError, match="gamma must be >= 0.0 and <= 1.0, got 1.5"):
        azx.ppo.Config(gamma=1.5)
    with pytest.raises(ValueError, match="normalize_advantages must be one of"):
        azx.ppo.Config(normalize_advantages="global")
    with pytest.raises(ValueError, match="num_envs must be a positive int, got 0"):
        azx.ppo.Config(num_envs=0)


def test_a_network_that_does_not_fit_is_refused():
    env = Countdown(num_actions=3)
    trainer = azx.ppo.PPO(env, azx.ppo.Config(num_envs=2, rollout_length=4, num_minibatches=2))
    wrong_actions = azx.nets.ActorCritic((2,), 5, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"logits of shape \(5,\).*needs \(3,\) logits"):
        trainer.init(wrong_actions, key=jax.random.key(0))
    wrong_observation = azx.nets.ActorCritic((7,), 3, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"does not fit the environment.*\(2,\)"):
        trainer.init(wrong_observation, key=jax.random.key(0))
    with pytest.raises(ValueError, match="PPO trains single-player environments"):
        azx.ppo.PPO(azx.envs.make("tic_tac_toe"))


def test_return_interval_uses_students_t():
    # t(0.975) from a printed table: 12.706 (1 degree of freedom), 2.776 (4), 2.045 (29),
    # 1.984 (99); the interval is mean ± t * s / sqrt(n).
    for n, t in [(2, 12.706), (5, 2.776), (30, 2.045), (100, 1.984)]:
        returns = jnp.arange(n, dtype=jnp.float32) ** 1.5
        result = azx.ppo.EvaluationResult(
            returns=returns, lengths=jnp.ones(n, jnp.int32), finished=jnp.ones(n, bool)
        )
        low, high = result.return_interval()
        half = t * np.std(np.asarray(returns, np.float64), ddof=1) / np.sqrt(n)
        assert result.mean_return() == pytest.approx(float(np.mean(returns)))
        assert (high - low) / 2 == pytest.approx(half, rel=2e-4)
    single = azx.ppo.EvaluationResult(jnp.ones(1), jnp.ones(1, jnp.int32), jnp.ones(1, bool))
    assert single.return_interval() == (-np.inf, np.inf)
