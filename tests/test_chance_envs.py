"""The chance adapters (2048, backgammon) against pgx's own `step`.

Positions come from random play; at each, one action is played by pgx (several keys)
and by the adapter (every outcome). Every state pgx reaches must be one of the outcomes'
states with positive probability, and the outcomes pgx's draws land on must follow the
adapter's probabilities (chi-square goodness of fit at significance 0.001; the seeds are
fixed, so each test is deterministic).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import azx.envs
from azx.envs._pgx import make_pgx


SIGNIFICANCE = 1e-3
NUM_GAMES, NUM_STEPS, NUM_DRAWS = 32, 128, 8  # 4,096 positions, 32,768 draws by pgx


def _positions(env, key, num_steps):
    """States of NUM_GAMES random games at each of their first `num_steps` steps."""

    def game(key):
        def body(state, key):
            action_key, step_key = jax.random.split(key)
            logits = jnp.where(env.legal_action_mask(state), 0.0, -jnp.inf)
            action = jax.random.categorical(action_key, logits)
            return env.step(state, action, step_key), state

        init_key, key = jax.random.split(key)
        return jax.lax.scan(body, env.init(init_key), jax.random.split(key, num_steps))[1]

    states = jax.vmap(game)(jax.random.split(key, NUM_GAMES))
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), states)


def _same(a, b):
    leaves = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return jnp.all(jnp.stack([jnp.all(x == y) for x, y in leaves]))


def _against_pgx(env, canonical):
    """For one (state, action, keys): the adapter's probabilities, mask and chance flag,
    whether every outcome gives the same state, and `match[draw, outcome]`: pgx's state
    for that key equals (up to `canonical`) the outcome's."""

    def one(state, action, keys):
        after = env.afterstate(state, action)
        outcomes = jnp.arange(env.num_outcomes)
        children = jax.vmap(lambda o: canonical(env.apply_outcome(after, o)))(outcomes)
        drawn = jax.vmap(lambda k: canonical(env.step(state, action, k)))(keys)
        match = jax.vmap(
            lambda d: jax.vmap(lambda o: _same(d, jax.tree.map(lambda c: c[o], children)))(outcomes)
        )(drawn)
        first = jax.tree.map(lambda c: c[0], children)
        all_alike = jax.vmap(lambda o: _same(first, jax.tree.map(lambda c: c[o], children)))(
            outcomes
        )
        return (
            env.chance_probabilities(after),
            env.chance_outcome_mask(after),
            env.has_chance(after),
            jnp.all(all_alike),
            match,
            env.sample_outcome(after, jax.random.fold_in(keys[0], 1)),
        )

    return jax.jit(jax.vmap(one))


def _check_reachable(probabilities, mask, has_chance, all_alike, match, sampled):
    """Every pgx draw is an outcome of positive probability (exactly one where there is
    chance); the adapter's distribution is well formed; returns the drawn outcomes."""
    probabilities, mask, has_chance, all_alike, match = map(
        np.asarray, (probabilities, mask, has_chance, all_alike, match)
    )
    np.testing.assert_array_equal(mask, probabilities > 0)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    # Without chance: all mass on outcome 0, and every outcome gives pgx's one state.
    assert np.all(probabilities[~has_chance, 0] == 1.0)
    assert np.all(all_alike[~has_chance])
    possible = match & mask[:, None, :]
    assert np.all(possible.any(axis=2)), "pgx reached a state that no outcome gives"
    assert np.all(possible[has_chance].sum(axis=2) == 1)
    assert np.all(mask[np.arange(len(sampled)), np.asarray(sampled)])
    return possible.argmax(axis=2)  # [position, draw]


@pytest.mark.slow  # (check_env's sampled-outcome test of the guide's Pig stays in the default run)
def test_2048_outcomes_are_pgxs_new_tiles():
    env = azx.envs.make("2048", max_episode_steps=100)  # the last steps truncate
    assert isinstance(env, azx.envs.Pgx2048) and env.num_outcomes == 32
    key = jax.random.key(0)
    states = jax.jit(lambda k: _positions(env, k, NUM_STEPS))(key)
    num_positions = NUM_GAMES * NUM_STEPS
    # Any action, illegal ones included (pgx ends the game and still adds a tile), except
    # an illegal one on a full board, where pgx draws from all-zero probabilities.
    full = np.asarray(jnp.all(states._board != 0, axis=1))
    allowed = np.asarray(states.legal_action_mask) | ~full[:, None]
    rng = np.random.default_rng(0)
    actions = np.array([rng.choice(np.flatnonzero(row)) for row in allowed], np.int32)
    keys = jax.random.split(jax.random.key(1), (num_positions, NUM_DRAWS))
    results = _against_pgx(env, lambda s: s)(states, jnp.asarray(actions), keys)
    drawn = _check_reachable(*results)
    probabilities, has_chance = np.asarray(results[0]), np.asarray(results[2])
    assert has_chance.sum() > 0.7 * num_positions  # most positions are still in play
    assert (~np.asarray(states.legal_action_mask)[np.arange(num_positions), actions]).sum() > 50
    # Probability integral transform: for a draw of outcome o from p, F(o-1) + V p(o) with
    # V uniform is uniform on [0, 1) whatever the position, so the draws of all positions
    # pool into one uniform sample (outcomes 0-15 put a 2, so [0, 0.9) is the 2s).
    p = np.repeat(probabilities[has_chance], NUM_DRAWS, axis=0)
    o = drawn[has_chance].reshape(-1)
    rows = np.arange(len(o))
    below = np.cumsum(p, axis=1)[rows, o] - p[rows, o]
    uniform = below + rng.uniform(size=len(o)) * p[rows, o]
    counts = np.histogram(uniform, bins=20, range=(0.0, 1.0))[0]
    result = scipy.stats.chisquare(counts)
    assert result.pvalue > SIGNIFICANCE, (counts, result)
    fours = (o >= 16).mean()
    assert abs(fours - 0.1) < 0.01, fours


def _dice_in_order(state):
    # pgx keeps its dice in the order drawn; the adapter puts the smaller first.
    return state.replace(_dice=jnp.sort(state._dice), _playable_dice=jnp.sort(state._playable_dice))


@pytest.mark.slow  # (2048's outcomes against pgx stay in the default run)
def test_backgammon_outcomes_are_pgxs_rolls():
    env = azx.envs.make("backgammon", max_episode_steps=120)  # the last steps truncate
    assert isinstance(env, azx.envs.PgxBackgammon) and env.num_outcomes == 21
    states = jax.jit(lambda k: _positions(env, k, NUM_STEPS))(jax.random.key(2))
    num_positions = NUM_GAMES * NUM_STEPS
    # Legal moves, and an illegal one in 1 of 16 (pgx ends the game with a penalty of 3,
    # after rolling if the move ended the turn).
    rng = np.random.default_rng(1)
    legal = np.asarray(states.legal_action_mask)
    any_move = rng.random(num_positions) < 1 / 16
    actions = np.array(
        [rng.choice(np.flatnonzero(row | anything)) for row, anything in zip(legal, any_move)],
        np.int32,
    )
    keys = jax.random.split(jax.random.key(3), (num_positions, NUM_DRAWS))
    results = _against_pgx(env, _dice_in_order)(states, jnp.asarray(actions), keys)
    drawn = _check_reachable(*results)
    probabilities, has_chance = np.asarray(results[0]), np.asarray(results[2])
    assert 0.2 * num_positions < has_chance.sum() < 0.8 * num_positions
    # Every roll has the same distribution wherever it happens: a plain goodness of fit.
    rolls = drawn[has_chance].reshape(-1)
    roll_probabilities = probabilities[has_chance][0].astype(np.float64)
    expected = roll_probabilities / roll_probabilities.sum() * len(rolls)
    counts = np.bincount(rolls, minlength=21)
    result = scipy.stats.chisquare(counts, expected)
    assert len(rolls) > 10_000 and result.pvalue > SIGNIFICANCE, (counts, result)
    # The adapter's own draws (`sample_outcome`), one per position, likewise.
    ours = np.asarray(results[5])[has_chance]
    expected_ours = roll_probabilities / roll_probabilities.sum() * len(ours)
    result = scipy.stats.chisquare(np.bincount(ours, minlength=21), expected_ours)
    assert result.pvalue > SIGNIFICANCE, result
    doubles = np.array([low == high for low in range(6) for high in range(low, 6)])
    np.testing.assert_allclose(expected[doubles] / len(rolls), 1 / 36, rtol=1e-6)
    np.testing.assert_allclose(expected[~doubles] / len(rolls), 2 / 36, rtol=1e-6)


def test_backgammon_opening_roll_is_drawn_by_init():
    # pgx's rules: the first roll is never a double, each other roll equally likely, and
    # who starts is a fair coin independent of it; `init` draws both, so no outcome does.
    env = azx.envs.make("backgammon")
    states = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.key(4), 30_000))
    dice = np.sort(np.asarray(states._dice), axis=1)
    assert np.all(dice[:, 0] != dice[:, 1])
    roll = dice[:, 0] * 6 + dice[:, 1]
    classes = np.unique(roll)
    assert len(classes) == 15
    starts = np.asarray(states.current_player)
    table = np.array([[np.sum((roll == c) & (starts == p)) for c in classes] for p in (0, 1)])
    result = scipy.stats.chisquare(table.ravel())  # 30 equally likely cells
    assert result.pvalue > SIGNIFICANCE, (table, result)


@pytest.mark.parametrize("name", ["2048", "backgammon"])
def test_step_is_pgxs_step_bit_for_bit(name):
    env, plain = azx.envs.make(name), make_pgx(name)
    assert isinstance(env, azx.envs.AbstractChanceEnv) and type(plain) is azx.envs.PgxEnv
    assert env.plain == plain and env.env is plain.env and env.name == name
    # Equal configurations are equal static data: jitted functions trace once.
    assert env == azx.envs.make(name) and hash(env) == hash(azx.envs.make(name))

    @jax.jit
    def both(key):
        state = _positions(env, key, 16)
        action = jnp.argmax(state.legal_action_mask, axis=1)
        keys = jax.random.split(key, len(action))
        return jax.vmap(env.step)(state, action, keys), jax.vmap(plain.step)(state, action, keys)

    ours, theirs = both(jax.random.key(5))
    assert bool(_same(ours, theirs))


def test_bad_outcomes_and_games_without_chance_are_errors():
    env = azx.envs.make("2048")
    state = env.init(jax.random.key(0))
    after = env.afterstate(state, jnp.argmax(env.legal_action_mask(state)))
    for outcome in (-1, 32):
        with pytest.raises(ValueError, match=rf"must lie in \[0, 32\), got {outcome}"):
            env.apply_outcome(after, jnp.int32(outcome))
    # Computed inside jit: a state with NaN rewards (no host callback, see
    # test_a_checked_outcome_keeps_the_program_cacheable).
    apply = jax.jit(env.apply_outcome)
    for outcome in (-1, 32):
        assert np.isnan(np.asarray(env.rewards(apply(after, jnp.int32(outcome))))).all()
    assert np.isfinite(np.asarray(env.rewards(apply(after, jnp.int32(31))))).all()
    assert bool(env.terminated(apply(after, jnp.int32(31)))) in (True, False)
    tic_tac_toe = azx.envs.make("tic_tac_toe")
    with pytest.raises(ValueError, match="'tic_tac_toe' does not expose chance"):
        azx.envs.require_chance(tic_tac_toe)
    assert azx.envs.require_chance(env) is env
    with pytest.raises(ValueError, match="expected azx.envs.PgxEnv of pgx's 'backgammon'"):
        azx.envs.PgxBackgammon(make_pgx("2048"))


@pytest.mark.parametrize("name", ["2048", "backgammon"])
def test_wrappers_pass_the_chance_through(name):
    """A wrapped game with chance is still one (ScaleRewards, ObserveLegalMoves, nested):
    its chance methods give the wrapped game's results, bit for bit, while what the
    wrapper changes (rewards, observations) is read from those states as the wrapper
    reads it; a wrapped game without chance stays without."""
    env = azx.envs.make(name)
    scaled = azx.envs.ScaleRewards(env, 0.5)
    wrapped = azx.envs.ObserveLegalMoves(scaled)
    for outer in (scaled, wrapped):
        assert isinstance(outer, azx.envs.AbstractChanceEnv)
        assert azx.envs.require_chance(outer) is outer
        assert outer.num_outcomes == env.num_outcomes
    assert isinstance(scaled, azx.envs.AbstractScaleRewards)
    assert scaled.env is env and scaled.scale == 0.5 and scaled.name == name
    assert isinstance(wrapped, azx.envs.AbstractObserveLegalMoves) and wrapped.env is scaled

    @jax.jit
    def both(key):
        state = _positions(env, key, 8)
        action = jnp.argmax(state.legal_action_mask, axis=1)
        keys = jax.random.split(key, len(action))

        def chance(game, state, action, key):
            after = game.afterstate(state, action)
            outcome = game.sample_outcome(after, key)
            child = game.apply_outcome(after, outcome)
            return (
                after,
                game.has_chance(after),
                game.chance_probabilities(after),
                game.chance_outcome_mask(after),
                outcome,
                child,
                game.rewards(child),
            )

        return [jax.vmap(chance, (None, 0, 0, 0))(g, state, action, keys) for g in (env, wrapped)]

    ours, theirs = both(jax.random.key(6))
    assert bool(_same(ours[:-1], theirs[:-1]))
    np.testing.assert_array_equal(0.5 * np.asarray(ours[-1]), np.asarray(theirs[-1]))
    tic_tac_toe = azx.envs.ScaleRewards(azx.envs.make("tic_tac_toe"), 2.0)
    assert not isinstance(tic_tac_toe, azx.envs.AbstractChanceEnv)
    with pytest.raises(ValueError, match="'tic_tac_toe' does not expose chance"):
        azx.envs.require_chance(tic_tac_toe)


def test_backgammon_unary_encoding_decodes_to_pgxs_board():
    """`encoding="unary"`: decoding each point's units (at least 1, 2, 3; half the rest)
    gives back pgx's checker counts, 15 a side with the bar and those borne off, and the
    dice left to play; chance and states are pgx's as before."""
    env = azx.envs.make("backgammon", encoding="unary")
    plain = azx.envs.make("backgammon")
    assert env.observation_shape == (202,) and env.observation_dtype == jnp.float32
    assert env.num_outcomes == plain.num_outcomes and env.plain == plain.plain
    states = jax.jit(lambda k: _positions(plain, k, 64))(jax.random.key(6))
    ours = np.asarray(jax.vmap(env.observation)(states), np.float64)
    pgx_observation = np.asarray(jax.vmap(plain.observation)(states))
    board, dice_left = pgx_observation[:, :28], pgx_observation[:, 28:]
    units = ours[:, :192].reshape(-1, 2, 24, 4)
    assert set(np.unique(units[..., :3])) <= {0.0, 1.0}
    counts = units[..., :3].sum(-1) + 2 * units[..., 3]  # [positions, side, point]
    np.testing.assert_array_equal(counts[:, 0], np.maximum(board[:, :24], 0))
    np.testing.assert_array_equal(counts[:, 1], np.maximum(-board[:, :24], 0))
    bar = ours[:, 192:194] * 2
    off = ours[:, 194:196] * 15
    np.testing.assert_allclose(counts.sum(-1) + bar + off, 15, atol=1e-5)
    np.testing.assert_allclose(ours[:, 196:] * 2, dice_left)
    with pytest.raises(ValueError, match=r"encoding must be one of \('pgx', 'unary'\), got 'x'"):
        azx.envs.make("backgammon", encoding="x")
    with pytest.raises(ValueError, match="takes no argument"):
        azx.envs.make("2048", encoding="unary")


def test_backgammon_unary_encoding_of_a_hand_built_position():
    # Own checkers: 4 on point 0, 1 on point 10, 2 on the bar, 8 borne off; the
    # opponent's: 6 on point 5, 3 on point 23, 1 on the bar, 5 borne off; a double 4 with
    # all four dice left.
    board = np.zeros(28, np.int32)
    board[[0, 10, 24, 26]] = 4, 1, 2, 8
    board[[5, 23, 25, 27]] = -6, -3, -1, -5
    dice_left = np.array([0, 0, 0, 4, 0, 0], np.int32)
    features = np.asarray(
        azx.envs.unary_backgammon(jnp.asarray(np.concatenate([board, dice_left])))
    )
    expected = np.zeros(202, np.float32)
    expected[0:4] = 1, 1, 1, 0.5  # own point 0: at least 1, 2, 3; (4 - 3) / 2
    expected[40:44] = 1, 0, 0, 0  # own point 10
    expected[96 + 20 : 96 + 24] = 1, 1, 1, 1.5  # opponent's point 5
    expected[96 + 92 : 96 + 96] = 1, 1, 1, 0  # opponent's point 23
    expected[192:196] = 1.0, 0.5, 8 / 15, 5 / 15  # bars (halved), borne off (over 15)
    expected[196:] = 0, 0, 0, 2, 0, 0
    np.testing.assert_allclose(features, expected, rtol=1e-6)


def _cache_events_of_a_second_compile(function, *args) -> list[str]:
    """Compile `function` twice, with JAX's in-memory caches dropped in between: what the
    persistent compilation cache records in the second compile (a request, then a hit, or
    a write, which JAX records as a miss, or neither where it refuses to store it)."""
    events = []

    def listen(event, **_):
        if event.startswith("/jax/compilation_cache/"):
            events.append(event.rsplit("/", 1)[-1])

    min_time = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        jax.jit(function).lower(*args).compile()
        jax.clear_caches()
        jax.monitoring.register_event_listener(listen)
        try:
            jax.jit(function).lower(*args).compile()
        finally:
            jax.monitoring.unregister_event_listener(listen)
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_time)
    return events


def test_a_checked_outcome_keeps_the_program_cacheable():
    # The tests' conftest gives every run a persistent compilation cache.
    assert jax.config.jax_compilation_cache_dir
    env = azx.envs.make("2048")
    state = env.init(jax.random.key(0))
    after = env.afterstate(state, jnp.argmax(env.legal_action_mask(state)))
    outcome = jnp.int32(3)

    def checked(after, outcome):  # apply_outcome checks with validate_outcome
        return env.rewards(env.apply_outcome(after, outcome))

    def raising(after, outcome):  # a host callback raises on a bad outcome
        return checked(after, azx.envs._chance.check_outcome(outcome, env.num_outcomes))

    events = _cache_events_of_a_second_compile(checked, after, outcome)
    assert events.count("compile_requests_use_cache") == 1 and "cache_hits" in events
    # JAX writes no program with a host callback to the cache: it compiles again.
    events = _cache_events_of_a_second_compile(raising, after, outcome)
    assert "compile_requests_use_cache" in events and "cache_hits" not in events


def test_validate_outcome():
    index, valid = azx.envs.validate_outcome(jnp.int32(4), 6)
    assert int(index) == 4 and bool(valid)
    with pytest.raises(ValueError, match=r"must lie in \[0, 6\), got 6"):
        azx.envs.validate_outcome(jnp.asarray([0, 6]), 6)

    @jax.jit
    def traced(outcome):
        return azx.envs.validate_outcome(outcome, 6)

    index, valid = traced(jnp.asarray([-2, 0, 5, 6, 9], jnp.int32))
    np.testing.assert_array_equal(index, [0, 0, 5, 5, 5])
    np.testing.assert_array_equal(valid, [False, True, True, False, False])
