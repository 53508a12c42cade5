"""The training step: purity, one compile, scan equivalence, loss, learning."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _tiers import slow_repeats
from _trainer_setup import tic_tac_toe
from test_search_common import assert_trees_equal

import azx
from azx.envs._mover import mover_reward_and_discount


# The slow tier repeats the check with Gumbel.
@pytest.mark.parametrize("search", slow_repeats(["gumbel", "puct"], {"gumbel"}))
def test_step_is_pure_compiles_once_and_scans_exactly(search):
    trainer, state = tic_tac_toe(search=search, reuse_tree=search == "puct")
    step = eqx.filter_jit(eqx.debug.assert_max_traces(trainer.step, max_traces=1))
    keys = jax.random.split(jax.random.key(5), 3)
    separate = state
    for key in keys:
        separate = step(separate, key)
    # Pure: the same inputs give the same outputs (and no retrace).
    assert_trees_equal(step(state, keys[0]), step(state, keys[0]))

    @eqx.filter_jit
    def scanned(state):
        return jax.lax.scan(lambda s, k: (trainer.step(s, k), None), state, keys)[0]

    assert_trees_equal(scanned(state), separate)
    assert int(separate.iteration) == 3
    assert trainer.env_steps(separate) == 3 * 8 * 4


def test_no_update_before_any_game_has_ended():
    trainer, state = tic_tac_toe()
    # Two moves per game cannot finish tic-tac-toe: no value target exists yet.
    trainer = azx.alphazero.AlphaZero(
        trainer.env, trainer.search, eqx.tree_at(lambda c: c.collect_steps, trainer.config, 2)
    )
    after = eqx.filter_jit(trainer.step)(state, jax.random.key(0))
    assert int(after.metrics.updates_applied) == 0
    assert int(after.metrics.buffer_positions) == 0
    assert_trees_equal(after.params, state.params)
    assert_trees_equal(after.opt_state, state.opt_state)


def test_loss_against_closed_form():
    # Uniform logits over n legal actions give policy cross-entropy log(n) for any target
    # distribution and entropy log(n); a zero value gives squared error target**2.
    net = azx.nets.UniformPolicy(4)
    legal = jnp.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], jnp.bool_)
    batch = azx.buffer.Batch(
        observation=jnp.zeros((3, 2), jnp.float32),
        legal_action_mask=legal,
        policy_target=jnp.array([[0.5, 0.5, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]], jnp.float32),
        value_target=jnp.array([1.0, -0.5, 3.0], jnp.float32),
        root_value=jnp.zeros(3, jnp.float32),
        mask=jnp.array([True, True, False]),
    )
    parts = azx.alphazero.loss(net, batch, value_loss_weight=2.0)
    np.testing.assert_allclose(parts.policy_loss, np.log(2) + np.log(4), rtol=1e-6)
    np.testing.assert_allclose(parts.policy_entropy, np.log(2) + np.log(4), rtol=1e-6)
    np.testing.assert_allclose(parts.value_loss, 1.0 + 0.25, rtol=1e-6)
    np.testing.assert_allclose(parts.value_error, 1.0 + 0.5, rtol=1e-6)
    np.testing.assert_allclose(parts.loss, np.log(8) + 2.0 * 1.25, rtol=1e-6)
    assert float(parts.count) == 2.0
    weighted = azx.alphazero.loss(net, batch, value_loss_weight=2.0, policy_loss_weight=3.0)
    np.testing.assert_allclose(weighted.policy_loss, 3 * (np.log(2) + np.log(4)), rtol=1e-6)
    np.testing.assert_allclose(weighted.loss, 3 * np.log(8) + 2.0 * 1.25, rtol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0}, "num_envs must be a positive int, got 0"),
        ({"collect_steps": -3}, "collect_steps must be a positive int, got -3"),
        ({"exploration_moves": -1}, "exploration_moves must be None or an int >= 0, got -1"),
        ({"random_opening_moves": -2}, "random_opening_moves must be an int >= 0, got -2"),
        ({"random_move_probability": 1.5}, r"random_move_probability must be in \[0, 1\], got 1.5"),
        ({"decay_iterations": 0}, "decay_iterations must be a positive int, got 0"),
        ({"num_envs": 8, "batch_size": 12}, r"batch_size \(12\) must be a multiple of num_envs"),
        (
            {"num_envs": 8, "batch_size": 16, "buffer_capacity": 100},
            r"buffer_capacity \(100\) must be a multiple of num_envs \(8\)",
        ),
        (
            {"num_envs": 8, "collect_steps": 16, "batch_size": 16, "buffer_capacity": 64},
            r"buffer_capacity \(64\) must be at least .* = 128",
        ),
        ({"learning_rate": -1.0}, "learning_rate must be >= 0, got -1.0"),
        ({"truncation": "cut"}, "truncation must be 'drop' or 'bootstrap', got 'cut'"),
        ({"root_value_weight": -0.5}, "root_value_weight must be >= 0, got -0.5"),
        ({"root_value_weight": 2.0}, r"root_value_weight must be in \[0, 1\], got 2.0"),
        ({"fast_search_simulations": 0}, "fast_search_simulations must be a positive int"),
        ({"full_search_probability": 0.0}, "full_search_probability must be > 0, got 0"),
        (
            {"num_envs": 8, "batch_size": 16, "past_opponent_fraction": 0.3},
            r"past_opponent_fraction must be 1/n for a whole n dividing num_envs \(8\), got 0.3",
        ),
        (
            {"num_envs": 6, "batch_size": 12, "past_opponent_fraction": 0.25},
            r"past_opponent_fraction must be 1/n .* num_envs \(6\), got 0.25",
        ),
        ({"past_opponent_fraction": 2.0}, "past_opponent_fraction must be 1/n"),
        ({"past_opponents": 0}, "past_opponents must be a positive int, got 0"),
        ({"past_opponent_interval": 0}, "past_opponent_interval must be a positive int, got 0"),
    ],
)
def test_config_is_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        azx.alphazero.Config(**kwargs)


def test_more_than_two_players_is_rejected():
    env = azx.envs.make("sparrow_mahjong")
    with pytest.raises(ValueError, match="num_players=3"):
        azx.alphazero.AlphaZero(env, azx.search.Gumbel(4))


@pytest.mark.slow
def test_tic_tac_toe_preset_learns_to_beat_random_play():
    """The raw network (argmax of its policy, no search) after the tic_tac_toe preset's
    training run, against a uniformly random player: 500 games as each colour."""
    preset = azx.presets.get("tic_tac_toe")
    trainer, state = preset.build(seed=0)
    state = eqx.filter_jit(trainer.train)(state, preset.iterations)
    assert int(state.iteration) == preset.iterations
    match = eqx.filter_jit(azx.arena.play_match)(
        trainer.env,
        azx.arena.NetworkAgent(state.net),
        azx.arena.RandomAgent(),
        num_games=1000,
        key=jax.random.key(123),
    )
    wins_first, _, _ = match.as_first
    _, _, losses_second = match.as_second
    print(f"as first W/D/L {match.as_first}, as second {match.as_second}")
    assert match.num_unfinished == 0
    assert wins_first >= 450  # at least 90% of 500 as first player
    assert losses_second <= 10  # at most 2% of 500 as second player


@pytest.mark.slow
def test_same_step_trains_2048_single_player_with_chance():
    """pgx 2048: one player, intermediate rewards, random tiles. The greedy network's
    returns after a short run against a uniformly random policy and the untrained
    network, over the same 256 games (same tile draws)."""
    game = azx.envs.make("2048")
    env = azx.envs.ScaleRewards(game, 0.01)  # returns of order 10, not 1000
    net = azx.nets.MLP(
        env.observation_shape,
        env.num_actions,
        width=128,
        bounded_value=False,
        key=jax.random.key(0),
    )
    search = azx.search.Gumbel(16, gamma=0.99, qtransform=azx.search.QByTree())
    config = azx.alphazero.Config(
        num_envs=64, collect_steps=16, train_steps=8, batch_size=256, buffer_capacity=16384
    )
    trainer = azx.alphazero.AlphaZero(env, search, config)
    state = eqx.filter_jit(trainer.train)(trainer.init(net, key=jax.random.key(1)), 60)

    @eqx.filter_jit
    def returns(agent):
        return azx.arena.episode_returns(game, agent, num_games=256, key=jax.random.key(9))

    random_returns, random_done = returns(azx.arena.RandomAgent())
    untrained, untrained_done = returns(azx.arena.NetworkAgent(net))
    trained, trained_done = returns(azx.arena.NetworkAgent(state.net))
    assert bool(jnp.all(random_done & untrained_done & trained_done))
    print(
        f"2048 mean return: random {float(random_returns.mean()):.0f}, untrained greedy "
        f"{float(untrained.mean()):.0f}, trained greedy {float(trained.mean()):.0f}"
    )
    assert float(trained.mean()) > 1.5 * float(random_returns.mean())
    assert float(trained.mean()) > 2.0 * float(untrained.mean())


def test_the_movers_reward_and_discount_follow_the_turn():
    """Tic-tac-toe: whoever starts (pgx draws it), the winning move rewards its mover +1
    while player 0's reward is +1 or -1, and every move passes the turn (`-gamma`)."""
    keys = jax.random.split(jax.random.key(1), 8)

    @jax.jit
    def tic_tac_toe_game(init_keys):
        env = azx.envs.make("tic_tac_toe")

        def move(state, action):
            next_state = jax.vmap(env.step)(state, jnp.full(8, action, jnp.int32), keys)
            return next_state, mover_reward_and_discount(env, state, next_state, 0.9)

        # The first player completes the top row.
        state = jax.vmap(env.init)(init_keys)
        state, (reward, discount) = jax.lax.scan(move, state, jnp.array([0, 3, 1, 4, 2]))
        return reward[-1], discount, jax.vmap(env.rewards)(state)[:, 0]

    reward, discount, player_0 = tic_tac_toe_game(jax.random.split(jax.random.key(0), 8))
    np.testing.assert_array_equal(np.asarray(discount), np.full((5, 8), -0.9, np.float32))
    np.testing.assert_array_equal(np.asarray(reward), np.ones(8, np.float32))
    assert set(np.asarray(player_0).tolist()) == {-1.0, 1.0}


# Options of self-play, checked in the slow tier: a move drawn at random with probability
# 1 replaces the search's, none drawn, and two random opening moves.
@pytest.mark.slow
@pytest.mark.parametrize(("opening", "probability"), [(0, 0.0), (2, 0.0), (0, 1.0)])
def test_random_moves_replace_the_search_choice_where_asked(opening, probability):
    # A deterministic search (uniform prior, zero value, temperature 0, no noise): the
    # moves played are its own choices except in the first `opening` moves of each game,
    # which are random (varied across games, and not always what the search would play),
    # and except every move when random moves have probability 1.
    env = azx.envs.make("tic_tac_toe")
    search = azx.search.PUCT(
        16, root_policy=azx.search.PUCTRoot(temperature=0.0, dirichlet_fraction=0.0)
    )
    config = azx.alphazero.Config(
        num_envs=32,
        collect_steps=1,
        train_steps=1,
        batch_size=32,
        buffer_capacity=32,
        random_opening_moves=opening,
        random_move_probability=probability,
    )
    trainer = azx.alphazero.AlphaZero(env, search, config)
    net = azx.nets.UniformPolicy(env.num_actions)
    state = trainer.init(net, key=jax.random.key(0))
    self_play = eqx.filter_jit(trainer.self_play)

    def occupied(s):
        return jnp.any(jax.vmap(env.observation)(s), axis=-1).reshape(32, 9)

    for move in range(3):
        before = state.env_state
        chosen = search(net, env, search.init(env, 32), before, key=jax.random.key(9)).action
        state = self_play(state, jax.random.key(move))
        moved = occupied(state.env_state) & ~occupied(before)
        assert bool(jnp.all(jnp.sum(moved, axis=-1) == 1))  # one legal move per game
        played = np.asarray(jnp.argmax(moved, axis=-1))
        if move < opening or probability == 1.0:
            assert np.any(played != np.asarray(chosen))
            if move == 0:
                assert len(set(played.tolist())) > 1
        else:
            np.testing.assert_array_equal(played, np.asarray(chosen))


def test_symmetry_augmentation_transforms_each_position_by_one_symmetry():
    env = azx.envs.make("tic_tac_toe")
    config = azx.alphazero.Config(
        num_envs=16,
        collect_steps=6,
        train_steps=1,
        batch_size=128,
        buffer_capacity=256,
        augment_symmetries=True,
    )
    trainer = azx.alphazero.AlphaZero(env, azx.search.Gumbel(8), config)
    net = azx.nets.MLP(env.observation_shape, env.num_actions, width=16, key=jax.random.key(0))
    state = eqx.filter_jit(trainer.self_play)(
        trainer.init(net, key=jax.random.key(1)), jax.random.key(2)
    )
    batch = trainer._sample(state.buffer, jax.random.key(3), jnp.int32(0))
    augmented = trainer._augment(batch, jax.random.key(4), jnp.int32(0))
    for row in np.flatnonzero(np.asarray(batch.mask)):
        observation = np.asarray(batch.observation[row]).reshape(-1)
        matches = [
            number
            for number, s in enumerate(env.symmetries())
            if np.array_equal(
                np.asarray(augmented.observation[row]).reshape(-1), observation[s.observation_index]
            )
            and np.array_equal(
                augmented.legal_action_mask[row], batch.legal_action_mask[row][s.action_index]
            )
            and np.array_equal(
                augmented.policy_target[row], batch.policy_target[row][s.action_index]
            )
        ]
        assert matches, f"row {row} is not a symmetric image of its position"
    # Positions that some symmetry moves are moved most of the time (7 in 8 draws or so).
    flat = np.asarray(batch.observation).reshape(128, -1)
    movable = np.any(
        [np.any(flat[:, s.observation_index] != flat, axis=1) for s in env.symmetries()], axis=0
    )
    changed = np.any(np.asarray(augmented.observation).reshape(128, -1) != flat, axis=1)
    assert movable.sum() > 32 and changed[movable].mean() > 0.6
    np.testing.assert_array_equal(augmented.value_target, batch.value_target)


def test_symmetry_augmentation_needs_declared_symmetries():
    env = azx.envs.make("2048")
    config = azx.alphazero.Config(num_envs=8, batch_size=16, augment_symmetries=True)
    with pytest.raises(ValueError, match="declares no symmetries"):
        azx.alphazero.AlphaZero(env, azx.search.Gumbel(8), config)


def test_fast_search_simulations_must_be_fewer_than_the_search():
    env = azx.envs.make("tic_tac_toe")
    config = azx.alphazero.Config(num_envs=8, batch_size=16, fast_search_simulations=8)
    with pytest.raises(ValueError, match=r"fast_search_simulations \(8\) must be fewer than the "):
        azx.alphazero.AlphaZero(env, azx.search.Gumbel(8), config)


@pytest.mark.slow  # an option of self-play, as the random moves below
def test_playout_cap_randomisation_mixes_full_and_fast_searches():
    # Deterministic searches (no Gumbel noise), so each move can be replayed: a move is a
    # full search for every game (its action played, its policy target stored) or a fast
    # one for every game (its best move played, no policy target), full about as often as
    # asked; positions of both kinds get value targets.
    env = azx.envs.make("tic_tac_toe")
    halving = azx.search.SequentialHalving(gumbel_scale=0.0, max_num_considered_actions=9)
    full = azx.search.Gumbel(16, root_policy=halving)
    fast = azx.search.Gumbel(4, root_policy=halving)
    config = azx.alphazero.Config(
        num_envs=16,
        collect_steps=1,
        train_steps=1,
        batch_size=16,
        buffer_capacity=16 * 24,
        fast_search_simulations=4,
        full_search_probability=0.5,
    )
    trainer = azx.alphazero.AlphaZero(env, full, config)
    net = azx.nets.MLP(env.observation_shape, env.num_actions, width=16, key=jax.random.key(0))
    state = trainer.init(net, key=jax.random.key(1))
    self_play = eqx.filter_jit(trainer.self_play)

    @eqx.filter_jit
    def search(s, states):
        return s(net, env, s.init(env, 16), states, key=jax.random.key(0))

    kinds = []
    for move in range(24):
        before = state.env_state
        state = self_play(state, jax.random.key(move))
        stored = state.buffer.experience.policy_target[:, move]
        if bool(jnp.all(jnp.sum(stored, axis=-1) > 0.99)):
            kinds.append("full")
            reference = search(full, before)
            np.testing.assert_allclose(stored, reference.policy_target, atol=1e-6)
            expected_action = reference.action
        else:
            np.testing.assert_array_equal(np.asarray(stored), 0.0)
            kinds.append("fast")
            expected_action = jnp.argmax(search(fast, before).policy_target, axis=-1)
        after = jax.vmap(env.step)(before, expected_action, jax.random.split(jax.random.key(0), 16))
        done = jax.vmap(env.terminated)(after)
        # Games that go on are where the expected move took them.
        np.testing.assert_array_equal(
            np.asarray(jax.vmap(env.observation)(after))[~np.asarray(done)],
            np.asarray(jax.vmap(env.observation)(state.env_state))[~np.asarray(done)],
        )
    assert 6 <= kinds.count("full") <= 18, kinds
    # Value targets are known for the positions of finished games, full or fast.
    has_target = np.asarray(state.buffer.has_target)
    with_policy = np.asarray(jnp.sum(state.buffer.experience.policy_target, axis=-1) > 0)
    assert has_target[with_policy].sum() > 0 and has_target[~with_policy].sum() > 0


def test_past_opponents_need_a_two_player_game():
    config = azx.alphazero.Config(num_envs=8, batch_size=16, past_opponent_fraction=0.5)
    with pytest.raises(ValueError, match="needs a two-player game; .* num_players=1"):
        azx.alphazero.AlphaZero(azx.envs.make("2048"), azx.search.Gumbel(8), config)


@pytest.mark.slow  # an option of self-play (past opponents), as the playout cap above
def test_past_networks_play_one_side_of_every_nth_game():
    # Deterministic searches (no Gumbel noise), so each move can be replayed: in every
    # fourth game one side is played by the kept past network (its search's move, no
    # policy target stored), alternately player 1 and player 0; every other move is the
    # current network's.
    env = azx.envs.make("tic_tac_toe")
    halving = azx.search.SequentialHalving(gumbel_scale=0.0, max_num_considered_actions=9)
    search = azx.search.Gumbel(8, root_policy=halving)
    config = azx.alphazero.Config(
        num_envs=16,
        collect_steps=1,
        train_steps=1,
        batch_size=16,
        buffer_capacity=16 * 12,
        past_opponent_fraction=0.25,
        past_opponents=1,
    )
    trainer = azx.alphazero.AlphaZero(env, search, config)

    def mlp(seed):
        return azx.nets.MLP(
            env.observation_shape, env.num_actions, width=16, key=jax.random.key(seed)
        )

    net, past_net = mlp(0), mlp(1)
    state = trainer.init(net, key=jax.random.key(1))
    past_params = eqx.filter(past_net, eqx.is_array)
    state = eqx.tree_at(
        lambda s: s.past_params, state, jax.tree.map(lambda p: p[None], past_params)
    )
    self_play = eqx.filter_jit(trainer.self_play)

    @eqx.filter_jit
    def searched(net, states):
        return search(net, env, search.init(env, 16), states, key=jax.random.key(0))

    rows = np.arange(16)
    past_rows, past_player = rows % 4 == 3, (rows // 4) % 2
    seen, differing = set(), 0
    for move in range(12):
        before = state.env_state
        state = self_play(state, jax.random.key(move))
        mover = np.asarray(jax.vmap(env.current_player)(before))
        past_moves = past_rows & (mover == past_player)
        seen.update(zip(past_player[past_moves].tolist(), mover[past_moves].tolist()))
        current, past = searched(net, before), searched(past_net, before)
        expected = np.where(past_moves, past.action, current.action)
        differing += int(np.sum(past_moves & (np.asarray(past.action) != current.action)))
        stored = np.asarray(state.buffer.experience.policy_target[:, move])
        np.testing.assert_array_equal(stored[past_moves], 0.0)
        np.testing.assert_allclose(
            stored[~past_moves], np.asarray(current.policy_target)[~past_moves], atol=1e-6
        )
        after = jax.vmap(env.step)(before, expected, jax.random.split(jax.random.key(0), 16))
        going_on = ~np.asarray(jax.vmap(env.terminated)(after))
        np.testing.assert_array_equal(
            np.asarray(jax.vmap(env.observation)(after))[going_on],
            np.asarray(jax.vmap(env.observation)(state.env_state))[going_on],
        )
    assert seen == {(0, 0), (1, 1)}, seen
    # The two networks chose differently in some of those moves, so the check above tells
    # them apart.
    assert differing > 0


@pytest.mark.slow  # an option of self-play (past opponents), as the playout cap above
def test_past_params_keep_the_newest_versions_at_the_interval():
    trainer, state = tic_tac_toe()
    config = eqx.tree_at(
        lambda c: (c.past_opponent_fraction, c.past_opponents, c.past_opponent_interval),
        trainer.config,
        (0.5, 2, 2),
    )
    trainer = azx.alphazero.AlphaZero(trainer.env, trainer.search, config)
    state = trainer.init(state.net, key=jax.random.key(1))
    step = eqx.filter_jit(trainer.step)
    params = [state.params]
    for iteration in range(5):
        state = step(state, jax.random.key(iteration))
        params.append(state.params)
    # Taken before the steps of iterations 0, 2 and 4: slot 0 holds iteration 4's
    # parameters (it replaced iteration 0's), slot 1 iteration 2's.
    for slot, taken in ((0, 4), (1, 2)):
        for past, then in zip(jax.tree.leaves(state.past_params), jax.tree.leaves(params[taken])):
            np.testing.assert_array_equal(past[slot], then)
    assert not all(
        np.array_equal(a, b) for a, b in zip(jax.tree.leaves(params[2]), jax.tree.leaves(params[4]))
    )


@pytest.mark.slow  # an option of the value target, as the playout cap above
def test_value_targets_mix_the_root_value_as_asked():
    trainer, state = tic_tac_toe()
    state = eqx.filter_jit(trainer.self_play)(state, jax.random.key(0))
    state = eqx.filter_jit(trainer.self_play)(state, jax.random.key(1))
    key, first_row = jax.random.key(2), jnp.int32(0)
    batch = trainer._sample(state.buffer, key, first_row)
    assert int(jnp.sum(batch.mask)) > 0
    gap = jnp.where(batch.mask, jnp.abs(batch.value_target - batch.root_value), 0.0)
    assert float(jnp.max(gap)) > 0.1  # the mix makes a difference
    for weight in (0.0, 0.3):
        config = eqx.tree_at(lambda c: c.root_value_weight, trainer.config, weight)
        mixed = azx.alphazero.AlphaZero(trainer.env, trainer.search, config)
        _, parts = eqx.filter_jit(mixed._learn)(state, key, first_row)
        target = (1 - weight) * batch.value_target + weight * batch.root_value
        mixed_batch = eqx.tree_at(lambda b: b.value_target, batch, target)
        expected = azx.alphazero.loss(state.net, mixed_batch)
        np.testing.assert_allclose(parts.value_loss, expected.value_loss, rtol=1e-5)


def test_equal_configurations_make_equal_trainers_that_compile_once():
    (first, first_state), (second, second_state) = tic_tac_toe(), tic_tac_toe()
    assert first is not second and first == second and hash(first) == hash(second)
    compilations = []

    def count(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compilations.append(event)

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        eqx.filter_jit(first.step)(first_state, jax.random.key(0))
        compiled = len(compilations)
        eqx.filter_jit(second.step)(second_state, jax.random.key(0))
    finally:
        jax.monitoring.unregister_event_duration_listener(count)
    assert compiled >= 1 and len(compilations) == compiled
