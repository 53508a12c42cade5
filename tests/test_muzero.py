"""MuZero's replay, unroll targets, loss and trainer: targets against hand computations,
the loss against a step-by-step re-computation, the trainer's shapes, sharding-free
determinism and exact resume through a checkpoint."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _four_devices import run_script

import azx
import azx.muzero as mz


K, N = 2, 3  # unroll steps, td steps: windows of K + N + 1 = 6 steps


def _window(reward, discount, root_value, terminated=(), truncated=(), num_actions=2):
    size = K + N + 1
    end = np.zeros(size, bool)
    return mz.Step(
        observation=jnp.arange(size, dtype=jnp.float32)[:, None],
        legal_action_mask=jnp.ones((size, num_actions), bool),
        action=jnp.arange(size, dtype=jnp.int32) % num_actions,
        policy_target=jnp.tile(jnp.array([0.25, 0.75]), (size, 1)),
        reward=jnp.asarray(reward, jnp.float32),
        discount=jnp.asarray(discount, jnp.float32),
        root_value=jnp.asarray(root_value, jnp.float32),
        terminated=jnp.asarray(np.isin(np.arange(size), terminated) | end),
        truncated=jnp.asarray(np.isin(np.arange(size), truncated) | end),
    )


R = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
V = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
G = [0.9] * 6


def _check(window, value, mask, reward, reward_mask, value_mask=None, absorbing_end=False):
    targets = mz.unroll_targets(window, K, N, absorbing_end=absorbing_end)
    np.testing.assert_allclose(np.asarray(targets.value_target), value, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(targets.mask), mask)
    np.testing.assert_array_equal(
        np.asarray(targets.value_mask), mask if value_mask is None else value_mask
    )
    np.testing.assert_allclose(np.asarray(targets.reward_target), reward)
    np.testing.assert_array_equal(np.asarray(targets.reward_mask), reward_mask)
    np.testing.assert_array_equal(np.asarray(targets.actions), [0, 1])


def test_targets_without_an_end_bootstrap_after_n_rewards():
    value = [
        1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 40,
        2 + 0.9 * 3 + 0.81 * 4 + 0.729 * 50,
        3 + 0.9 * 4 + 0.81 * 5 + 0.729 * 60,
    ]
    _check(_window(R, G, V), value, [1, 1, 1], [1, 2], [1, 1])


def test_targets_at_a_termination_stop_and_mask_what_follows():
    # The action of step 1 ends the episode: no bootstrap, steps 2.. are another episode.
    _check(_window(R, G, V, terminated=[1]), [1 + 0.9 * 2, 2, 0], [1, 1, 0], [1, 2], [1, 1])
    # Ended by step 0's action: only the root and its reward are trained.
    _check(_window(R, G, V, terminated=[0]), [1, 0, 0], [1, 0, 0], [1, 0], [1, 0])
    # An end by step 3's action: k = 0's three rewards stop short of it (bootstrap from
    # step 3's root value); k = 1 and k = 2 reach it and stop there.
    _check(
        _window(R, G, V, terminated=[3]),
        [1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 40, 2 + 0.9 * 3 + 0.81 * 4, 3 + 0.9 * 4],
        [1, 1, 1],
        [1, 2],
        [1, 1],
    )


def test_targets_at_a_truncation_bootstrap_from_the_truncated_step():
    # Truncated after step 1: its root value stands for everything from it on.
    _check(_window(R, G, V, truncated=[1]), [1 + 0.9 * 20, 20, 0], [1, 1, 0], [1, 2], [1, 1])
    _check(
        _window(R, G, V, truncated=[2]),
        [1 + 0.9 * 2 + 0.81 * 30, 2 + 0.9 * 30, 30],
        [1, 1, 1],
        [1, 2],
        [1, 1],
    )


def test_absorbing_end_trains_zeros_after_a_termination_but_not_a_truncation():
    absorbing = dict(absorbing_end=True)
    # Ended by step 1's action: step 2's value and every later reward are 0, and trained.
    _check(
        _window(R, G, V, terminated=[1]),
        [1 + 0.9 * 2, 2, 0],
        [1, 1, 0],
        [1, 2],
        [1, 1],
        value_mask=[1, 1, 1],
        **absorbing,
    )
    _check(
        _window(R, G, V, terminated=[0]),
        [1, 0, 0],
        [1, 0, 0],
        [1, 0],
        [1, 1],
        value_mask=[1, 1, 1],
        **absorbing,
    )
    # A time limit: what follows is unknown, so it stays masked.
    _check(
        _window(R, G, V, truncated=[1]),
        [1 + 0.9 * 20, 20, 0],
        [1, 1, 0],
        [1, 2],
        [1, 1],
        **absorbing,
    )
    # Truncated by step 0; step 1's termination belongs to the next episode.
    _check(
        _window(R, G, V, terminated=[1], truncated=[0]),
        [10, 0, 0],
        [1, 0, 0],
        [1, 0],
        [1, 0],
        **absorbing,
    )


def test_two_player_targets_flip_sign_each_ply():
    # Turns alternate (discount -1); the mover of step 2 wins by its action.
    reward = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    _check(
        _window(reward, [-1.0] * 6, V, terminated=[2]),
        [1.0, -1.0, 1.0],
        [1, 1, 1],
        [0, 0],
        [1, 1],
    )


def test_replay_samples_only_complete_windows_of_consecutive_steps():
    replay = mz.SegmentReplay(slots=10, unroll_steps=K, td_steps=N)
    example = jax.tree.map(lambda x: x[0], _window(R, G, V))
    state = replay.init(example, num_envs=2)
    for t in range(13):  # wraps the ring of 10
        step = jax.tree.map(lambda x: jnp.stack([x, x]), example)
        step = eqx.tree_at(
            lambda s: (s.reward, s.observation),
            step,
            (jnp.full(2, float(t)), jnp.full((2, 1), float(t))),
        )
        state = replay.add(state, step)
        sampleable = np.asarray(replay.sampleable(state))
        # Steps 0 .. t are held (the newest 10); those with 5 later steps can start.
        held = range(max(0, t - 9), t + 1)
        expected = {s % 10 for s in held if t - s >= K + N}
        assert set(np.flatnonzero(sampleable[0])) == expected
    row = jax.tree.map(lambda x: x[0], state)
    targets, observation, valid = replay.sample_row(row, key=jax.random.key(0), batch_size=64)
    assert np.all(np.asarray(valid))
    starts = np.asarray(observation)[:, 0]
    assert set(starts.astype(int)) == {3, 4, 5, 6, 7}
    # The segment's rewards are its start's and the next step's.
    np.testing.assert_array_equal(
        np.asarray(targets.reward_target), np.stack([starts, starts + 1], axis=1)
    )
    # The consistency loss's observations are the next K steps'.
    np.testing.assert_array_equal(
        np.asarray(targets.next_observation)[:, :, 0], np.stack([starts + 1, starts + 2], axis=1)
    )
    empty = replay.init(example, num_envs=1)
    _, _, valid = replay.sample_row(
        jax.tree.map(lambda x: x[0], empty), key=jax.random.key(0), batch_size=4
    )
    assert not np.any(np.asarray(valid))


def test_scale_gradient_keeps_the_value_and_scales_the_gradient():
    x = jnp.array([1.0, -2.0])
    np.testing.assert_array_equal(np.asarray(mz.scale_gradient(x, 0.5)), np.asarray(x))
    grad = jax.grad(lambda x: jnp.sum(mz.scale_gradient(x, 0.5) ** 2))(x)
    np.testing.assert_allclose(np.asarray(grad), 0.5 * 2 * np.asarray(x))


@pytest.mark.parametrize("support_size,absorbing_end", [(None, False), (5, False), (5, True)])
def test_segment_loss_equals_a_step_by_step_computation(support_size, absorbing_end):
    net = mz.mlp_net(
        (1,), 2, embedding_size=4, width=8, support_size=support_size, key=jax.random.key(0)
    )
    window = _window(R, G, V, terminated=[1])
    targets = mz.unroll_targets(window, K, N, absorbing_end=absorbing_end)
    policy, value, reward, consistency, entropy = mz.segment_loss(
        net, window.observation[0], targets, value_loss_weight=0.25, reward_loss_weight=1.0
    )

    def head_loss(head, target):
        if support_size is None:
            return 0.5 * (float(head[0]) - target) ** 2
        h = np.sign(target) * (np.sqrt(abs(target) + 1) - 1) + 1e-3 * target
        h = min(max(h, -support_size), support_size)
        low = int(np.floor(h))
        p = np.zeros(2 * support_size + 1)
        p[low + support_size] = 1 - (h - low)
        if h > low:
            p[low + support_size + 1] = h - low
        log_p = np.asarray(jax.nn.log_softmax(head), np.float64)
        return -float(np.sum(p * log_p))

    # Targets by hand: step 1 ends the episode.
    value_target, mask = [1 + 0.9 * 2, 2.0, 0.0], [1, 1, 0]
    value_mask = [1, 1, 1] if absorbing_end else mask  # step 2 lies past the end
    embedding = net.represent(window.observation[0])
    expected_policy = expected_value = expected_reward = 0.0
    for k in range(K + 1):
        weight = 1.0 if k == 0 else 1.0 / K
        logits, value_head = net.prediction(embedding)
        log_pi = np.asarray(jax.nn.log_softmax(logits), np.float64)
        if k == 0:
            expected_entropy = -float(np.sum(np.exp(log_pi) * log_pi))
        expected_policy += weight * mask[k] * -float(np.sum([0.25, 0.75] * log_pi))
        expected_value += weight * value_mask[k] * head_loss(value_head, value_target[k])
        if k < K:
            reward_head, embedding = net.dynamics(embedding, jnp.int32(k % 2))
            expected_reward += head_loss(reward_head, R[k]) / K  # both actions in-episode
    np.testing.assert_allclose(float(policy), expected_policy, rtol=1e-5)
    np.testing.assert_allclose(float(value), 0.25 * expected_value, rtol=1e-5)
    np.testing.assert_allclose(float(reward), expected_reward, rtol=1e-5)
    np.testing.assert_allclose(float(entropy), expected_entropy, rtol=1e-5)


def _with_consistency_head(net, key):
    head = mz.ConsistencyHead((4,), hidden_size=8, projection_size=3, key=key)
    return eqx.tree_at(lambda n: n.consistency, net, head, is_leaf=lambda x: x is None)


@pytest.mark.slow  # an option of the loss (EfficientZero's); a test below checks it off
def test_consistency_loss_equals_a_step_by_step_computation():
    net = _with_consistency_head(
        mz.mlp_net((1,), 2, embedding_size=4, width=8, key=jax.random.key(0)), jax.random.key(1)
    )
    # Step 1 ends the episode: the observation of unroll step 2 is the next episode's.
    window = _window(R, G, V, terminated=[1])
    targets = mz.unroll_targets(window, K, N, absorbing_end=True)
    weight = 2.0

    def consistency_of(net):
        return mz.segment_loss(net, window.observation[0], targets, consistency_loss_weight=weight)[
            3
        ]

    # By hand: the dynamics' embedding after action k against the representation of the
    # observation at step k + 1, the target's projection a constant (no gradient).
    head = net.consistency
    real = [np.asarray(head.project(net.represent(window.observation[k]))) for k in (1, 2)]
    in_episode = [1.0, 0.0]

    def by_hand(net):
        head, embedding, total = net.consistency, net.represent(window.observation[0]), 0.0
        for k in range(K):
            _, embedding = net.dynamics(embedding, jnp.int32(k % 2))
            embedding = mz.scale_gradient(embedding, 0.5)
            online = head.predict(head.project(embedding))
            cosine = jnp.dot(online, real[k]) / (jnp.linalg.norm(online) * np.linalg.norm(real[k]))
            total += in_episode[k] * (1.0 - cosine) / K
        return weight * total

    np.testing.assert_allclose(float(consistency_of(net)), float(by_hand(net)), rtol=1e-5)
    assert float(consistency_of(net)) > 0.0
    grads = eqx.filter_grad(consistency_of)(net)
    expected = eqx.filter_grad(by_hand)(net)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-7)
    # Past the episode's end (masked), the loss has no gradient at all: the same
    # segment with both steps masked.
    masked = eqx.tree_at(lambda t: t.mask, targets, jnp.array([True, False, False]))
    none = eqx.filter_grad(
        lambda n: mz.segment_loss(n, window.observation[0], masked, consistency_loss_weight=weight)[
            3
        ]
    )(net)
    assert all(not np.any(np.asarray(g)) for g in jax.tree.leaves(none))


def test_zero_consistency_weight_gives_the_loss_and_gradients_without_the_head():
    plain = mz.mlp_net((1,), 2, embedding_size=4, width=8, support_size=5, key=jax.random.key(0))
    headed = _with_consistency_head(plain, jax.random.key(1))
    window = _window(R, G, V, truncated=[3])
    targets = jax.tree.map(lambda x: x[None], mz.unroll_targets(window, K, N))
    observation, valid = window.observation[:1], jnp.array([True])

    def objective(net):
        parts = mz.loss(net, observation, targets, valid, consistency_loss_weight=0.0)
        return parts.loss, parts

    (total, parts), grads = eqx.filter_value_and_grad(objective, has_aux=True)(headed)
    (plain_total, plain_parts), plain_grads = eqx.filter_value_and_grad(objective, has_aux=True)(
        plain
    )
    assert float(parts.consistency_loss) == 0.0
    assert float(total) == float(parts.policy_loss + parts.value_loss + parts.reward_loss)
    _assert_states_equal(parts, plain_parts)
    assert float(total) == float(plain_total)
    # The shared networks' gradients bit for bit; the head's all zero.
    _assert_states_equal(eqx.tree_at(lambda n: n.consistency, grads, None), plain_grads)
    assert all(not np.any(np.asarray(g)) for g in jax.tree.leaves(grads.consistency))
    with pytest.raises(ValueError, match="needs a network with a consistency head"):
        mz.loss(plain, observation, targets, valid, consistency_loss_weight=1.0)


def _assert_states_equal(a, b):
    def data(x):
        return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x

    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(data(x)), np.asarray(data(y)))


def _trainer(search=None):
    env = azx.envs.make("gymnax:CartPole-v1")
    config = mz.Config(
        num_envs=4,
        collect_steps=4,
        train_steps=2,
        batch_size=16,
        buffer_capacity=4 * 32,
        unroll_steps=3,
        td_steps=4,
        reanalyse_steps=2,
    )
    search = search or azx.search.Gumbel(4, gamma=0.99)
    trainer = mz.MuZero(env, search, config)
    net = mz.mlp_net(
        env.observation_shape,
        env.num_actions,
        embedding_size=8,
        width=16,
        support_size=5,
        key=jax.random.key(0),
    )
    return trainer, trainer.init(net, key=jax.random.key(1))


def test_step_and_train_shapes_and_determinism():
    trainer, state = _trainer()
    step = eqx.filter_jit(eqx.debug.assert_max_traces(trainer.step, max_traces=1))
    one = step(state, jax.random.key(5))
    assert int(one.iteration) == 1
    assert one.replay.steps.observation.shape == (4, 32, 4)
    assert int(one.metrics.replay_segments) == 0  # 4 steps per row: no complete window
    assert int(one.metrics.updates_applied) == 0
    np.testing.assert_array_equal(
        np.asarray(jax.tree.leaves(one.params)[0]), np.asarray(jax.tree.leaves(state.params)[0])
    )
    _assert_states_equal(one, step(state, jax.random.key(5)))
    # Four iterations keyed as `train` keys them, through the step compiled above (`train`
    # is the trainers' shared `lax.scan` of `step`, which MuZero's command-line runs use).
    trained = state
    for _ in range(4):
        trained = step(trained, jax.random.fold_in(trained.key, trained.iteration))
    assert int(trained.iteration) == 4
    # 16 steps per row, windows of 8: steps 0..8 start segments in each of 4 rows.
    assert int(trained.metrics.replay_segments) == 4 * 9
    assert int(trained.metrics.updates_applied) == 2
    assert np.isfinite(float(trained.metrics.loss))
    assert trainer.env_steps(trained) == 4 * 4 * 4


@pytest.mark.slow  # two training runs and a checkpoint (15 s); the slow tier keeps it
def test_resume_through_a_checkpoint_equals_a_straight_run(tmp_path):
    trainer, state = _trainer()
    train = eqx.filter_jit(trainer.train)
    straight = train(state, 4)
    half = train(state, 2)
    checkpoints = azx.checkpoint.Checkpointer(tmp_path)
    checkpoints.save(half, step=2)
    restored = checkpoints.restore(state, step=2)
    _assert_states_equal(straight, train(restored, 2))


@pytest.mark.slow  # a whole training run (11-17 s); the slow tier keeps it
def test_reanalyse_replaces_chosen_steps_targets_by_a_fresh_search():
    # Noise-free halving: the search does not depend on its key, so the fresh targets can
    # be computed here independently.
    trainer = mz.MuZero(
        azx.envs.make("gymnax:CartPole-v1"),
        mz.greedy_search(_trainer()[0]),
        _trainer()[0].config,
    )
    _, state = _trainer()
    state = eqx.filter_jit(trainer.self_play)(state, jax.random.key(3))  # 4 steps per row
    # Another network's search: the stored targets are the first network's.
    other = mz.mlp_net((4,), 2, embedding_size=8, width=16, support_size=5, key=jax.random.key(9))
    state = eqx.tree_at(lambda s: s.params, state, eqx.filter(other, eqx.is_array))
    after = eqx.filter_jit(trainer.reanalyse)(state, jax.random.key(4))

    before, new = state.replay.steps, after.replay.steps
    fresh = mz.search_observations(
        trainer.search,
        other,
        mz.Observation(
            observation=before.observation.reshape(-1, 4),
            legal_action_mask=before.legal_action_mask.reshape(-1, 2),
        ),
        two_player=False,
        key=jax.random.split(jax.random.key(0), 4 * 32),
    )
    fresh_value = np.asarray(fresh.root_value).reshape(4, 32)
    fresh_policy = np.asarray(fresh.policy_target).reshape(4, 32, 2)
    changed = np.asarray(new.root_value) != np.asarray(before.root_value)
    # Exactly reanalyse_steps stored steps per row, each now holding the fresh search's
    # targets; everything else as it was.
    written = np.asarray(state.replay.written)
    np.testing.assert_array_equal(changed.sum(axis=1), [2] * 4)
    assert np.all(written[changed])
    np.testing.assert_allclose(np.asarray(new.root_value)[changed], fresh_value[changed], rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(new.policy_target)[changed], fresh_policy[changed], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(
        np.asarray(new.policy_target)[~changed], np.asarray(before.policy_target)[~changed]
    )
    for name in ("observation", "action", "reward", "discount", "terminated"):
        np.testing.assert_array_equal(getattr(new, name), getattr(before, name))


@pytest.mark.slow  # a whole training run (11-17 s); the slow tier keeps it
def test_two_player_game_trains_with_alternating_discounts():
    env = azx.envs.make("tic_tac_toe")
    config = mz.Config(
        num_envs=4,
        collect_steps=6,
        train_steps=1,
        batch_size=8,
        buffer_capacity=4 * 24,
        unroll_steps=2,
        td_steps=3,
        augment_symmetries=True,  # segments through the board's symmetries, trained alike
        consistency_loss_weight=2.0,  # the consistency head added by init, over planes
    )
    trainer = mz.MuZero(env, azx.search.Gumbel(4), config)
    # The residual networks (embeddings of 8 planes of 3x3) through the whole trainer.
    net = mz.resnet_net(
        env.observation_shape, env.num_actions, channels=8, num_blocks=1, key=jax.random.key(0)
    )
    assert trainer.model(net).two_player
    state = eqx.filter_jit(trainer.train)(trainer.init(net, key=jax.random.key(1)), 2)
    steps = state.replay.steps
    written = np.asarray(state.replay.written)
    # Turns alternate in tic-tac-toe: every stored step's discount is -gamma.
    np.testing.assert_array_equal(np.asarray(steps.discount)[written], -1.0)
    # The mover's reward is +1 on a winning move and never negative (pgx pays a loss to
    # the player who does not move).
    rewards = np.asarray(steps.reward)[written]
    assert set(np.unique(rewards)) <= {0.0, 1.0}
    assert np.all(rewards[~np.asarray(steps.terminated)[written]] == 0.0)
    assert int(state.metrics.updates_applied) == 1 and np.isfinite(float(state.metrics.loss))
    assert state.net.consistency.embedding_shape == (8, 3, 3) and net.consistency is None
    # 1 - cos lies in [0, 2] per step, each weighted 1 / K, times the weight 2.
    assert 0.0 < float(state.metrics.consistency_loss) <= 4.0


def test_bad_configurations_are_refused():
    with pytest.raises(ValueError, match="reuse_tree=False"):
        _trainer(azx.search.PUCT(4, reuse_tree=True))
    with pytest.raises(ValueError, match="collect_steps \\+ unroll_steps \\+ td_steps \\+ 1"):
        mz.Config(num_envs=4, buffer_capacity=8)
    with pytest.raises(ValueError, match="batch_size \\(10\\) must be a multiple"):
        mz.Config(num_envs=4, batch_size=10)
    with pytest.raises(ValueError, match="decay_iterations must be a positive int, got 0"):
        mz.Config(decay_iterations=0)
    with pytest.raises(ValueError, match=r"reanalyse_steps \(33\) exceeds the 32 steps"):
        mz.Config(num_envs=4, buffer_capacity=4 * 32, reanalyse_steps=33)
    with pytest.raises(ValueError, match="reanalyse_steps must be"):
        mz.Config(reanalyse_steps=-1)
    with pytest.raises(ValueError, match="consistency_loss_weight must be"):
        mz.Config(consistency_loss_weight=-2.0)


def test_evaluate_plays_whole_episodes_with_the_search():
    trainer, state = _trainer()
    result = eqx.filter_jit(mz.evaluate)(
        trainer, state.net, num_episodes=3, key=jax.random.key(0), max_steps=30
    )
    returns, lengths = np.asarray(result.returns), np.asarray(result.lengths)
    # CartPole pays 1 per step: the return is the length; an episode cut at max_steps is
    # marked unfinished.
    np.testing.assert_array_equal(returns, lengths.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(result.finished), lengths < 30)
    assert np.all((lengths >= 1) & (lengths <= 30))
    greedy = mz.greedy_search(trainer)
    assert greedy.root_policy.gumbel_scale == 0.0
    assert mz.greedy_search(_trainer(azx.search.PUCT(4))[0]).root_policy.temperature == 0.0
    # greedy=False plays the trainer's own search as it is: for a trainer that already
    # searches noise-free, the very episodes of the greedy evaluation.
    noise_free = mz.MuZero(trainer.env, greedy, trainer.config)
    sampled = eqx.filter_jit(mz.evaluate)(
        noise_free, state.net, num_episodes=3, key=jax.random.key(0), max_steps=30, greedy=False
    )
    np.testing.assert_array_equal(np.asarray(sampled.lengths), lengths)


def test_preset_round_trips_and_builds():
    preset = azx.presets.get("muzero_cartpole")
    assert azx.presets.from_dict(preset.to_dict()) == preset
    trainer, state = preset.build(seed=0)
    assert isinstance(trainer, mz.MuZero) and isinstance(state, mz.TrainState)
    assert trainer.env_steps_per_iteration * preset.iterations >= 100_000
    with pytest.raises(ValueError, match="taken by azx's own presets"):
        azx.presets.register(preset)


@pytest.mark.parametrize(
    "name, planes, ppo_iterations",
    [("muzero_breakout", 4, 50), ("muzero_freeway", 7, 10)],
    ids=["breakout", "freeway"],
)
def test_minatar_presets_round_trip(name, planes, ppo_iterations):
    preset = azx.presets.get(name)
    assert azx.presets.from_dict(preset.to_dict()) == preset
    config = preset.config
    # The run is as long as ppo_iterations of ppo_breakout's 64 x 128 steps: the two are
    # compared at equal environment steps.
    steps = config.num_envs * config.collect_steps * preset.iterations
    assert steps == ppo_iterations * 64 * 128
    assert config.decay_iterations == preset.iterations
    env = preset.make_env()
    assert env.observation_shape == (10, 10, planes) and env.num_actions == 3


@pytest.mark.slow
def test_breakout_preset_builds_and_trains_an_iteration():
    # Building and compiling the preset's step take about a minute on a loaded 2-core CPU.
    preset = azx.presets.get("muzero_breakout")
    trainer, state = preset.build(seed=0)
    assert isinstance(trainer, mz.MuZero) and isinstance(state, mz.TrainState)
    state, history = eqx.filter_jit(trainer.train_and_record)(state, 1)
    assert int(state.iteration) == 1
    assert trainer.env_steps(state) == preset.config.num_envs * preset.config.collect_steps
    assert np.all(np.isfinite(np.asarray(history.loss)))


@pytest.mark.slow
def test_four_devices_train_like_one():
    assert "MUZERO SHARDED OK" in run_script("_muzero_sharded_run.py")


@pytest.mark.slow
def test_a_two_player_muzero_run_is_evaluated_and_played_as_an_alphazero_run(tmp_path):
    from _cli import azx_cli

    out = tmp_path / "run"
    result = azx_cli(
        "train", "--preset", "muzero_tic_tac_toe", "--out", out, "--iterations", 2,
        "--eval-every", 2, "--eval-games", 10, "--opponent", "random", "--opponent", "solver",
        "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = azx.run.read_metrics(out)
    assert [r["iteration"] for r in records if "eval" in r] == [0, 2]
    for record in records:
        if "eval" in record:
            by_opponent = record["eval"]["search"]
            assert by_opponent["random"]["games"] == by_opponent["solver"]["games"] == 10
            assert by_opponent["solver"]["wins"] == 0  # the solver never loses
    run = azx.run.load_run(out)
    agent = run.agent("search", num_simulations=8)
    assert isinstance(agent, mz.MuZeroAgent) and agent.search.num_simulations == 8
    # The preset's evaluation search (PUCT 64), not its training search (Gumbel 32).
    search = run.agent("search").search
    assert isinstance(search, azx.search.PUCT) and search.num_simulations == 64
    result = azx_cli(
        "eval", "--run", out, "--opponent", "solver", "--games", 10, "--agent", "network",
        "--json", tmp_path / "eval.json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    solver = json.loads((tmp_path / "eval.json").read_text())["results"]["solver"]
    assert solver["games"] == 10 and solver["wins"] == 0


def test_symmetry_draw_maps_actions_as_it_permutes_per_action_arrays():
    from azx._trainer import SymmetryDraw

    env = azx.envs.make("tic_tac_toe")
    draw = SymmetryDraw.make(env, jax.random.key(0), jnp.int32(0), 64, 8)
    assert set(np.unique(np.asarray(draw.choice))) == set(range(len(env.symmetries())))
    actions = jnp.tile(jnp.arange(9, dtype=jnp.int32), (64, 1))  # every action, per example
    one_hot = jax.nn.one_hot(actions, 9)  # [64, 9 actions, 9]
    permuted = jax.vmap(draw.permute, in_axes=(1, None), out_axes=1)(one_hot, draw.action_index)
    # The one-hot vector of a move, permuted, is the one-hot vector of the mapped move.
    np.testing.assert_array_equal(permuted, jax.nn.one_hot(draw.map_actions(actions), 9))
    # Each symmetry maps the board's squares as it maps the moves onto them.
    board = jnp.arange(9 * 2, dtype=jnp.float32).reshape(1, 3, 3, 2)
    for s in env.symmetries():
        moved = np.asarray(board).reshape(-1)[s.observation_index].reshape(3, 3, 2)
        np.testing.assert_array_equal(moved[..., 0].reshape(-1), 2 * np.asarray(s.action_index))


def test_symmetry_augmentation_needs_a_game_with_symmetries():
    config = mz.Config(num_envs=4, buffer_capacity=4 * 32, augment_symmetries=True)
    with pytest.raises(ValueError, match="declares no symmetries"):
        mz.MuZero(azx.envs.make("gymnax:CartPole-v1"), azx.search.Gumbel(4), config)
