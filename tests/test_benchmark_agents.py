"""The wrapper agent of benchmarks/handover.py, against the exact tic-tac-toe solver: who
plays which plies shows in whether a game can be lost."""

import pathlib
import sys

import equinox as eqx
import jax
import pytest

import azx


# `pytest` puts tests/ on the path, not the repository root with the benchmarks package.
sys.path.append(str(pathlib.Path(__file__).parents[1]))
from benchmarks.handover import Handover  # noqa: E402


GAMES = 200


@pytest.fixture(scope="module")
def env():
    return azx.envs.make("tic_tac_toe")


_match = eqx.filter_jit(azx.arena.play_match)


def _losses(env, agent, opponent) -> int:
    return _match(env, agent, opponent, num_games=GAMES, key=jax.random.key(0)).losses


def test_handover_passes_the_game_from_early_to_late(env):
    solver, random = azx.arena.TicTacToeSolver(), azx.arena.RandomAgent()
    # Whoever plays every move of the side decides: 0 plies is `late` alone, 9 `early`.
    assert _losses(env, Handover(random, solver, 0), random) == 0
    assert _losses(env, Handover(solver, random, 9), random) == 0
    assert _losses(env, Handover(solver, random, 0), random) > 0
    assert _losses(env, Handover(random, solver, 9), random) > 0
