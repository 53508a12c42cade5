"""OpenSpiel as an outside reference: its games against pgx's, its bots against azx's."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _optional import error_without

import azx
from azx.arena import (
    OpenSpielAlphaBetaAgent,
    OpenSpielMCTSAgent,
    RandomAgent,
    TicTacToeSolver,
    opponent,
    play_match,
)
from azx.arena._openspiel import _GAMES


pyspiel = pytest.importorskip("pyspiel")

TIC_TAC_TOE = azx.envs.make("tic_tac_toe")


@functools.partial(eqx.filter_jit, donate="none")
def jit_match(env, agent_a, agent_b, key, num_games):
    return play_match(env, agent_a, agent_b, num_games=num_games, key=key)


@pytest.mark.parametrize(
    "name, num_games", [("tic_tac_toe", 300), ("connect_four", 300), ("othello", 200)]
)
def test_pgx_and_openspiel_play_the_same_game(name, num_games):
    """Random games played in both: at every step the same legal actions, player to move,
    rewards and end. The action numbers the OpenSpiel agents send to pgx rest on this."""
    env = azx.envs.make(name)
    spec = _GAMES[name]
    game = pyspiel.load_game(spec.openspiel_name)
    closing_passes = 0 if spec.closing_pass is None else 2
    assert game.num_distinct_actions() == spec.num_actions
    assert game.max_game_length() + closing_passes == spec.max_moves
    step = jax.jit(jax.vmap(env.step))
    state = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.key(0), num_games))
    spiel_states = [game.new_initial_state() for _ in range(num_games)]
    # OpenSpiel's player 0 moves first; pgx draws the first mover's id at random.
    first = np.asarray(state.current_player)
    rng = np.random.default_rng(0)
    ended = np.zeros(num_games, np.bool_)
    passes = np.zeros(num_games, np.int32)  # pgx's passes after OpenSpiel's game ended
    for move in range(spec.max_moves + 1):
        legal = np.asarray(state.legal_action_mask)
        ended_before, ended = ended, np.asarray(state.terminated)
        rewards = np.asarray(state.rewards)
        player = np.asarray(state.current_player)
        actions = np.zeros(num_games, np.int32)
        for row, spiel in enumerate(spiel_states):
            if ended_before[row]:  # (pgx steps finished games too, with no rewards)
                continue
            where = f"{name} game {row} move {move}"
            closing = spiel.is_terminal() and not ended[row]
            assert spiel.is_terminal() == ended[row] or passes[row] < closing_passes, where
            expected = spiel.returns() if ended[row] else [0.0, 0.0]
            assert rewards[row, first[row]] == expected[0], where
            assert rewards[row, 1 - first[row]] == expected[1], where
            if ended[row]:
                continue
            if closing:
                assert np.flatnonzero(legal[row]).tolist() == [spec.closing_pass], where
                passes[row] += 1
            else:
                assert sorted(spiel.legal_actions()) == np.flatnonzero(legal[row]).tolist(), where
                assert spiel.current_player() == int(player[row] != first[row]), where
            actions[row] = rng.choice(np.flatnonzero(legal[row]))
            if not closing:
                spiel.apply_action(int(actions[row]))
        if ended.all():
            break
        state = step(state, jnp.asarray(actions), jax.random.split(jax.random.key(move), num_games))
    assert ended.all()
    assert set(passes.tolist()) <= {0, closing_passes}
    if closing_passes:  # the case occurred
        assert (passes > 0).any()
    # Both sides won some games.
    returns = np.array([spiel.returns()[0] for spiel in spiel_states])
    assert (returns == 1).any() and (returns == -1).any()


@functools.partial(eqx.filter_jit, donate="none")
def after(env, agent, games):
    """Env states and agent states after each row's moves (-1 pads shorter games)."""
    games = jnp.asarray(games, jnp.int32)
    state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), games.shape[0]))

    def play(carry, action):
        state, history = carry
        played = action >= 0
        keys = jax.random.split(jax.random.key(0), action.shape[0])
        stepped = jax.vmap(env.step)(state, jnp.maximum(action, 0), keys)
        observed = agent.observe(history, jnp.maximum(action, 0), stepped.terminated)
        return jax.tree.map(
            lambda new, old: jnp.where(played.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
            (stepped, observed),
            (state, history),
        ), None

    return jax.lax.scan(play, (state, agent.init(env, games.shape[0])), games.T)[0]


@functools.partial(eqx.filter_jit, donate="none")
def act(env, agent, history, state, key):
    return agent(env, history, state, key=key)[0]


def test_bots_take_a_win_and_block_a_loss():
    connect_four = azx.envs.make("connect_four")
    # The first player has 0, 1, 2 on the bottom row (the second stacked on them): column
    # 3 wins for the side to move; one move earlier, the second player must block it.
    games = [[0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, -1]]
    for agent in [OpenSpielMCTSAgent(200), OpenSpielAlphaBetaAgent(2)]:
        state, history = after(connect_four, agent, games)
        action = act(connect_four, agent, history, state, jax.random.key(1))
        assert action.tolist() == [3, 3], agent


def test_mcts_beats_random_and_the_same_key_gives_the_same_games():
    mcts = opponent("openspiel-mcts:50", TIC_TAC_TOE)
    result = jit_match(TIC_TAC_TOE, mcts, RandomAgent(), jax.random.key(0), 40)
    assert result.score > 0.8 and result.losses <= 2, str(result)
    again = jit_match(TIC_TAC_TOE, mcts, RandomAgent(), jax.random.key(0), 40)
    assert np.array_equal(result.outcome, again.outcome)
    assert np.array_equal(result.num_moves, again.num_moves)


def test_alpha_beta_and_the_solver_draw_every_game():
    """Two perfect tic-tac-toe players written independently: all draws, either colour."""
    alpha_beta = opponent("openspiel-alphabeta:9", TIC_TAC_TOE)
    result = jit_match(TIC_TAC_TOE, alpha_beta, TicTacToeSolver(), jax.random.key(2), 40)
    assert result.counts == (0, 40, 0), str(result)
    assert bool(jnp.all(result.finished))


def test_specs_and_games_are_checked():
    assert opponent("openspiel-mcts:1000").num_simulations == 1000
    assert opponent(" openspiel-alphabeta:4 ", azx.envs.make("othello")).depth == 4
    for spec, env, message in [
        ("openspiel-mcts", None, "positive number of simulations"),
        ("openspiel-mcts:0", None, "positive number of simulations"),
        ("openspiel-alphabeta:x", None, "positive search depth"),
        ("openspiel-mcts:10", azx.envs.make("2048"), "plays tic_tac_toe, connect_four, othello"),
        ("openspiel-alphabeta:2", azx.envs.make("go_9x9"), "not 'go_9x9'"),
    ]:
        with pytest.raises(ValueError, match=message):
            opponent(spec, env)
    with pytest.raises(ValueError, match="plays tic_tac_toe"):
        OpenSpielMCTSAgent(10).init(azx.envs.make("hex"), 2)
    # An agent that did not see the moves refuses to guess.
    agent = OpenSpielAlphaBetaAgent(1)
    state, history = after(TIC_TAC_TOE, agent, [[4, 0], [4, -1]])
    stale = eqx.tree_at(lambda h: h.num_moves, history, history.num_moves.at[1].set(0))
    with pytest.raises(Exception, match="lost track of game 1"):
        act(TIC_TAC_TOE, agent, stale, state, jax.random.key(0))


def test_open_spiel_is_optional():
    assert "pip install 'azx[openspiel]'" in error_without("pyspiel", "openspiel-mcts:10")
