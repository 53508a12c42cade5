"""The exact tic-tac-toe checker (benchmarks/tictactoe_exact.py) against independent facts:
known counts and values, the solver's tables, perfect and random players."""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

import azx


# `pytest` puts tests/ on the path, not the repository root with the benchmarks package.
sys.path.append(str(pathlib.Path(__file__).parents[1]))
from benchmarks import tictactoe_exact as exact  # noqa: E402


def _row(positions, moves):
    padded = list(moves) + [exact.NO_MOVE] * (8 - len(moves))
    matches = np.flatnonzero((positions.moves == np.array(padded)).all(axis=1))
    assert len(matches) == 1
    return int(matches[0])


def test_counts_of_reachable_positions():
    # 5,478 legal positions in all, of which 958 are finished games (won or full).
    positions = exact.reachable_positions()
    assert len(positions.moves) == 4520
    assert len({tuple(b) for b in positions.boards}) == 4520
    # Every legal move of every position has a value; moves are exactly the empty cells.
    assert ((positions.move_values != exact.ILLEGAL) == (positions.boards == 0)).all()


def test_known_values():
    positions = exact.reachable_positions()
    empty = positions.move_values[_row(positions, [])]
    assert (empty == 0).all()  # every opening move draws: not decisive
    assert not positions.decisive[_row(positions, [])]
    # X on 0 and 1, O on 3 and 4, X to move: 2 wins at once, 5 blocks O's row (a draw),
    # anything else lets O win on 5.
    win = positions.move_values[_row(positions, [0, 3, 1, 4])]
    assert win[2] == 1 and win[5] == 0 and (win[6:] == -1).all()
    assert positions.decisive[_row(positions, [0, 3, 1, 4])]
    # After X in a corner, O's only drawing reply is the centre.
    corner = positions.move_values[_row(positions, [0])]
    assert corner[4] == 0 and (np.delete(corner, [0, 4]) == -1).all()


def test_agrees_with_the_solver_tables():
    env = azx.envs.make("tic_tac_toe")
    solver = azx.arena.TicTacToeSolver()
    positions = exact.reachable_positions()
    states = exact.replay(env, positions.moves)
    # The replayed states are the boards (pgx plane 0 holds the mover's marks).
    observation = np.asarray(jax.vmap(env.observation)(states)).reshape(-1, 9, 2)
    x_to_move = (positions.boards == 1).sum(axis=1) == (positions.boards == 2).sum(axis=1)
    x_marks = np.where(x_to_move[:, None], observation[:, :, 0], observation[:, :, 1])
    np.testing.assert_array_equal(x_marks, positions.boards == 1)
    # Position values agree; the solver's optimal moves (fastest win, slowest loss) are
    # among the moves of the best value.
    best = positions.move_values.max(axis=1)
    np.testing.assert_array_equal(np.asarray(solver.value(env, states)), best)
    solver_optimal = np.asarray(solver.optimal_action_mask[solver.code(env, states)])
    assert not (solver_optimal & ~positions.optimal_mask).any()


def test_solver_plays_every_position_optimally_and_random_does_not():
    env = azx.envs.make("tic_tac_toe")
    solver = azx.arena.TicTacToeSolver()

    def solver_moves(env, states):
        return jnp.argmax(solver.optimal_action_mask[solver.code(env, states)], axis=-1)

    result = exact.check(solver_moves, env)
    assert result.num_positions == len(exact.decisive_positions().moves) > 3000
    assert result.num_optimal == result.num_positions

    def random_moves(env, states):
        legal = jax.vmap(env.legal_action_mask)(states)
        noise = jax.random.uniform(jax.random.key(0), legal.shape)
        return jnp.argmax(jnp.where(legal, noise, -1.0), axis=-1)

    random = exact.check(random_moves, env)
    assert random.num_optimal < 0.7 * random.num_positions
    miss = int(np.flatnonzero(~random.optimal)[0])
    assert "played" in random.describe_miss(miss)


def test_check_network_uses_the_policy_argmax():
    # A "network" whose logits prefer the lowest-numbered cell: its score is that of the
    # first legal move, computed here from the values directly.
    def net(observation):
        return -jnp.arange(9, dtype=jnp.float32), jnp.float32(0.0)

    result = exact.check_network(net)
    positions = exact.decisive_positions()
    first_legal = np.argmax(positions.move_values != exact.ILLEGAL, axis=1)
    np.testing.assert_array_equal(result.chosen, first_legal)
    expected = positions.optimal_mask[np.arange(len(first_legal)), first_legal].sum()
    assert result.num_optimal == expected


def _first_legal(env, states):
    legal = jax.vmap(env.legal_action_mask)(states)
    return jnp.argmax(legal, axis=-1)


def test_against_perfect_play_finds_every_losing_move_of_a_fixed_agent():
    # Reference: a plain depth-first walk over every line (no merging of move orders) of
    # the agent that plays the lowest free cell against every optimal reply.
    def walk(board, agent_to_move, found):
        if exact._winner(board) or 0 not in board:
            return
        values = exact._move_values(board)
        mover = 1 if board.count(1) == board.count(2) else 2
        if agent_to_move:
            move = board.index(0)
            if values[move] < max(values.values()):
                found.add(board)
                return
            walk(board[:move] + (mover,) + board[move + 1 :], False, found)
        else:
            for cell, value in values.items():
                if value == max(values.values()):
                    walk(board[:cell] + (mover,) + board[cell + 1 :], True, found)

    expected = set()
    walk((0,) * 9, True, expected)
    walk((0,) * 9, False, expected)
    result = exact.against_perfect_play(_first_legal)
    found = {exact._board(moves) for moves, _ in result.mistakes}
    assert found == expected and len(expected) > 0
    assert all(move == exact._board(moves).index(0) for moves, move in result.mistakes)


def test_a_perfect_agent_makes_no_losing_move_and_a_solver_beats_a_flawed_one():
    env = azx.envs.make("tic_tac_toe")
    solver = azx.arena.TicTacToeSolver()
    perfect = exact.against_perfect_play(exact.agent_moves(solver), env)
    assert perfect.mistakes == [] and perfect.num_positions > 100
    # The lowest-free-cell agent loses to the solver in a real match, as its losing moves
    # on perfect-play lines say it can.
    flawed = exact.against_perfect_play(_first_legal, env)
    assert flawed.mistakes

    class FirstLegal(azx.arena.AbstractAgent):
        def init(self, env, batch_size):
            return jnp.zeros(batch_size, bool)

        def __call__(self, env, agent_state, env_state, *, key):
            return _first_legal(env, env_state), agent_state

        def observe(self, agent_state, action, done):
            return agent_state

    match = azx.arena.play_match(env, FirstLegal(), solver, num_games=20, key=jax.random.key(0))
    assert int(match.losses) > 0
