"""The environment interface: pgx adapter and a pure-JAX game through the same API."""

import math

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _games import SubtractionGame
from _tiers import slow_repeats
from hypothesis import given, settings

import azx.envs


GAMES = ["tic_tac_toe", "connect_four", "othello", "go_9x9", "2048", "backgammon"]
BATCH = 64
# Random play ends every episode of these games well within this many steps; the test
# asserts that it did.
MAX_STEPS = 2000


def _random_legal_action(key, legal_action_mask):
    return jax.random.categorical(key, jnp.where(legal_action_mask, 0.0, -jnp.inf))


def _play_to_the_end(env, key):
    """Random legal play of one episode, checking invariants at every step."""

    def cond(carry):
        _, _, steps, done, _ = carry
        return (steps < MAX_STEPS) & ~done

    def body(carry):
        state, key, steps, _, stats = carry
        key, action_key, step_key = jax.random.split(key, 3)
        was_terminated = env.terminated(state)
        legal = env.legal_action_mask(state)
        action = _random_legal_action(action_key, legal)
        next_state = env.step(state, action, step_key)
        rewards = env.rewards(next_state)
        stats = {
            "illegal": stats["illegal"] | (~legal[action] & ~was_terminated),
            "returns": stats["returns"] + rewards,
            "max_imbalance": jnp.maximum(stats["max_imbalance"], jnp.abs(jnp.sum(rewards))),
            "length": stats["length"] + (~was_terminated).astype(jnp.int32),
            "left_terminal": stats["left_terminal"],
        }
        # Once terminated, further steps must keep the state terminated with zero rewards.
        after = env.step(next_state, action, step_key)
        stays = ~env.terminated(next_state) | (
            env.terminated(after) & jnp.all(env.rewards(after) == 0.0)
        )
        stats["left_terminal"] = stats["left_terminal"] | ~stays
        return next_state, key, steps + 1, env.terminated(next_state), stats

    stats = {
        "illegal": jnp.bool_(False),
        "returns": jnp.zeros(env.num_players, jnp.float32),
        "max_imbalance": jnp.float32(0.0),
        "length": jnp.int32(0),
        "left_terminal": jnp.bool_(False),
    }
    key, init_key = jax.random.split(key)
    state = env.init(init_key)
    carry = (state, key, jnp.int32(0), env.terminated(state), stats)
    state, _, _, done, stats = jax.lax.while_loop(cond, body, carry)
    observation = env.observation(state)
    return done, stats, observation


# The default run plays a board game and a single-player game with chance (2048); the slow
# tier adds the other boards (go's games are the longest to play out) and backgammon.
@pytest.mark.parametrize(
    "name", slow_repeats(GAMES, {"go_9x9", "connect_four", "othello", "backgammon"})
)
def test_random_play_under_jit_and_vmap(name):
    env = azx.envs.make(name)
    play = jax.jit(jax.vmap(lambda key: _play_to_the_end(env, key)))
    done, stats, observation = play(jax.random.split(jax.random.key(0), BATCH))
    assert bool(jnp.all(done)), f"{name}: an episode ran past {MAX_STEPS} steps"
    assert not bool(jnp.any(stats["illegal"]))
    assert not bool(jnp.any(stats["left_terminal"]))
    assert bool(jnp.all(stats["length"] > 0))
    assert observation.shape == (BATCH, *env.observation_shape)
    assert observation.dtype == env.observation_dtype
    if env.num_players == 2:
        # Zero-sum: every transition's rewards cancel, so the final returns do too, and a
        # finished episode has a result in {-1, 0, 1} for the first player (a pgx game
        # ended by an illegal move would show a penalty instead).
        assert float(jnp.max(stats["max_imbalance"])) == 0.0
        np.testing.assert_array_equal(stats["returns"][:, 0], -stats["returns"][:, 1])
        assert set(np.unique(stats["returns"][:, 0]).tolist()) <= {-1.0, 0.0, 1.0} | (
            {-3.0, -2.0, 2.0, 3.0} if name == "backgammon" else set()  # gammons, backgammons
        )
    else:
        # 2048 rewards are the merged tile values: non-negative, and positive over a game.
        assert bool(jnp.all(stats["returns"] > 0.0))


@pytest.mark.parametrize("name", GAMES)
def test_declared_sizes_match_states(name):
    env = azx.envs.make(name)
    state = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.key(1), 3))
    assert jax.vmap(env.observation)(state).shape == (3, *env.observation_shape)
    assert jax.vmap(env.observation)(state).dtype == env.observation_dtype
    assert jax.vmap(env.legal_action_mask)(state).shape == (3, env.num_actions)
    assert jax.vmap(env.rewards)(state).shape == (3, env.num_players)
    assert jax.vmap(env.current_player)(state).shape == (3,)
    assert isinstance(env.num_actions, int) and isinstance(env.num_players, int)
    assert all(isinstance(d, int) for d in env.observation_shape)


# The default run checks a board game and the chance games; the slow tier the other boards.
@pytest.mark.parametrize("name", slow_repeats(GAMES, {"connect_four", "othello", "go_9x9"}))
def test_a_fresh_state_has_the_leaves_a_step_gives(name):
    # Unbatched, outside any transformation: the search builds its tree from such a state.
    env = azx.envs.make(name)
    state = env.init(jax.random.key(2))
    action = jnp.argmax(env.legal_action_mask(state)).astype(jnp.int32)
    child = env.step(state, action, jax.random.key(3))
    assert jax.tree.structure(state) == jax.tree.structure(child)
    for fresh, stepped in zip(jax.tree.leaves(state), jax.tree.leaves(child), strict=True):
        assert isinstance(fresh, jax.Array)
        assert (fresh.shape, fresh.dtype) == (stepped.shape, stepped.dtype)


def test_unknown_name_lists_available():
    with pytest.raises(ValueError, match="unknown environment 'tictactoe'.*tic_tac_toe"):
        azx.envs.make("tictactoe")


def test_keyword_arguments_reach_pgx_and_are_checked():
    env = azx.envs.make("go_9x9", komi=0.5)
    assert env.env._game.komi == 0.5 and env.observation_shape == (9, 9, 17)
    with pytest.raises(ValueError, match="takes no argument.*colour.*accepts: size, komi"):
        azx.envs.make("go_9x9", colour=1)
    with pytest.raises(ValueError, match="max_episode_steps must be a positive int"):
        azx.envs.make("tic_tac_toe", max_episode_steps=0)


def test_equal_configurations_do_not_recompile():
    # Equal configurations are equal static data, so a jitted function traces once.
    first, second = azx.envs.make("connect_four"), azx.envs.make("connect_four")
    assert first == second and hash(first) == hash(second)


def test_truncation_after_max_episode_steps():
    env = azx.envs.make("2048", max_episode_steps=5)
    state = env.init(jax.random.key(0))
    step = jax.jit(env.step)
    for i in range(5):
        assert not bool(env.truncated(state)), i
        action = jnp.argmax(env.legal_action_mask(state))
        state = step(state, action, jax.random.key(i))
    assert bool(env.truncated(state)) and not bool(env.terminated(state))
    after = step(state, jnp.argmax(env.legal_action_mask(state)), jax.random.key(9))
    assert bool(env.truncated(after)) and float(jnp.sum(env.rewards(after))) == 0.0


# --- a property test against an independent tic-tac-toe written in plain Python ------

_LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _reference_tic_tac_toe(choices):
    """Play choices[i] (an index into the sorted legal cells); yield each position."""
    board, player, winner = [None] * 9, 0, None
    for choice in choices:
        legal = [i for i in range(9) if board[i] is None]
        if winner is not None or not legal:
            break
        cell = legal[choice % len(legal)]
        board[cell] = player
        if any(all(board[i] == player for i in line) for line in _LINES):
            winner = player
        player = 1 - player
        yield cell, list(board), player, winner, winner is not None or None not in board


@jax.jit
def _adapter_positions(cells):
    env = azx.envs.make("tic_tac_toe")

    def body(state, cell):
        mover = env.current_player(state)
        state = env.step(state, cell, jax.random.key(0))
        return state, (
            mover,
            env.observation(state),
            env.rewards(state),
            env.terminated(state),
            env.legal_action_mask(state),
        )

    return jax.lax.scan(body, env.init(jax.random.key(0)), cells)[1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=9, max_size=9))
def test_tic_tac_toe_matches_plain_python(choices):
    positions = list(_reference_tic_tac_toe(choices))
    cells = jnp.array([cell for cell, *_ in positions], jnp.int32)
    mover, observation, rewards, terminated, legal = _adapter_positions(cells)
    for t, (_, board, player, winner, over) in enumerate(positions):
        assert bool(terminated[t]) == over
        mine = np.array([c == player for c in board]).reshape(3, 3)
        theirs = np.array([c == 1 - player for c in board]).reshape(3, 3)
        # The observation is from the player to move: their own marks first.
        np.testing.assert_array_equal(observation[t][..., 0], mine)
        np.testing.assert_array_equal(observation[t][..., 1], theirs)
        if not over:
            np.testing.assert_array_equal(legal[t], [c is None for c in board])
        if winner is None:
            assert float(jnp.abs(rewards[t]).sum()) == 0.0
        else:  # the winner is whoever just moved; pgx numbers players independently of X/O
            np.testing.assert_array_equal(
                rewards[t], np.where(np.arange(2) == int(mover[t]), 1.0, -1.0)
            )


# --- any JAX environment plugs in through the same interface -------------------------


def _minimax(pile: int) -> int:
    """Value of the subtraction game for the player to move, by brute force."""
    if pile == 0:
        return -1
    return max(-_minimax(pile - take) for take in (1, 2, 3) if take <= pile)


def test_pure_jax_game_implements_the_interface():
    game = SubtractionGame(start_pile=10)
    assert isinstance(game, azx.envs.AbstractEnv)
    play = jax.jit(jax.vmap(lambda key: _play_to_the_end(game, key)))
    done, stats, observation = play(jax.random.split(jax.random.key(0), 32))
    assert bool(jnp.all(done)) and not bool(jnp.any(stats["illegal"]))
    assert not bool(jnp.any(stats["left_terminal"]))
    np.testing.assert_array_equal(stats["returns"][:, 0], -stats["returns"][:, 1])
    assert observation.shape == (32, *game.observation_shape)
    # The known game value: the mover loses exactly on multiples of 4.
    assert [_minimax(p) for p in range(1, 13)] == [1 if p % 4 else -1 for p in range(1, 13)]
    assert math.prod(game.observation_shape) == 11


@pytest.mark.parametrize(
    "name, invariant_at_start, options",
    [
        ("connect_four", 2, {}),
        ("tic_tac_toe", 8, {}),
        ("go_9x9", 8, {}),
        ("othello", 4, {}),
        # The legal-move planes transform with the board: the slow tier checks them.
        pytest.param("othello", 4, {"observe_legal_moves": True}, marks=pytest.mark.slow),
    ],
)
def test_symmetries_match_playing_the_transformed_moves(name, invariant_at_start, options):
    # Checked against the game itself: from a start position that a symmetry leaves
    # unchanged, playing the images of random moves must give the images of the
    # observations and legal masks. (Othello's start is unchanged by 4 of its 8.)
    env = azx.envs.make(name, **options)
    step = jax.jit(env.step)
    key = jax.random.key(0)
    start = env.init(key)
    shape = env.observation_shape

    def image(observation, symmetry):
        flat = np.asarray(observation).reshape(-1)
        return flat[symmetry.observation_index].reshape(shape)

    checked = 0
    for number, symmetry in enumerate(env.symmetries()):
        assert sorted(symmetry.action_index) == list(range(env.num_actions))
        assert sorted(symmetry.observation_index) == list(range(math.prod(shape)))
        if not np.array_equal(image(env.observation(start), symmetry), env.observation(start)):
            continue
        inverse = np.argsort(symmetry.action_index)
        rng = np.random.default_rng(number)
        original, transformed = start, start
        for _ in range(12):
            legal = np.asarray(env.legal_action_mask(original))
            np.testing.assert_array_equal(
                np.asarray(env.observation(transformed)), image(env.observation(original), symmetry)
            )
            np.testing.assert_array_equal(
                np.asarray(env.legal_action_mask(transformed)), legal[symmetry.action_index]
            )
            if bool(env.terminated(original)):
                break
            action = int(rng.choice(np.flatnonzero(legal)))
            original = step(original, jnp.int32(action), key)
            transformed = step(transformed, jnp.int32(inverse[action]), key)
        checked += 1
    assert checked == invariant_at_start


def test_observe_legal_moves_appends_the_mask_to_the_flat_observation():
    plain = azx.envs.make("othello")
    env = azx.envs.make("othello", observe_legal_moves=True)
    assert isinstance(env, azx.envs.AbstractObserveLegalMoves) and env.name == "othello"
    assert env.observation_shape == (8 * 8 * 2 + 65,)
    step = jax.jit(env.step)
    state, key = env.init(jax.random.key(1)), jax.random.key(2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        observation, legal = (
            np.asarray(env.observation(state)),
            np.asarray(env.legal_action_mask(state)),
        )
        assert observation.shape == env.observation_shape
        assert observation.dtype == env.observation_dtype == plain.observation_dtype
        np.testing.assert_array_equal(observation[:128], np.ravel(plain.observation(state)))
        np.testing.assert_array_equal(observation[128:], legal)
        state = step(state, jnp.int32(rng.choice(np.flatnonzero(legal))), key)
