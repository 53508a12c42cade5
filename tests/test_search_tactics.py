"""Tactics from first principles: with a uniform prior and zero value (no knowledge but
the rules), search must find an immediate win and a forced block on hand-made positions.

Positions are written as move lists (tic_tac_toe cells 0-8 row by row, connect_four
columns 0-6); the answers are checked by hand, independently of any search. Answers avoid
action 0 so that lowest-index tie-breaking cannot find them by accident, and each position
is searched four times in the batch, with different Dirichlet or Gumbel noise.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_search_common import play, search_uniform

import azx
from azx.search import PUCT, Gumbel, PUCTRoot


# (moves so far, winning or saving actions)
POSITIONS = {
    "tic_tac_toe": [
        ([0, 3, 1, 4], {2}),  # X wins on the top row (O threatens 5, too slow)
        ([0, 4, 1], {2}),  # O must block the top row
        ([4, 0, 8, 2], {1}),  # X must block O's top row; X's diagonal is already blocked
    ],
    "connect_four": [
        ([6, 5, 6, 5, 6, 4], {6}),  # X wins on column 6
        ([6, 5, 6, 5, 6], {6}),  # O must block column 6
        ([1, 1, 2, 2, 3, 3], {0, 4}),  # X completes the bottom row at either end
    ],
}
# A double threat: X wins now at 0 or 4, but almost any other move also wins by force (O
# can block only one end). PUCT's visits pile onto the immediate win; Gumbel compares moves
# by noise + logits + sigma(Q), and between two forced wins (Q 1 now, or gamma**2 later)
# the noise decides, as it should. So this case checks PUCT only.
PUCT_ONLY = {("connect_four", 2)}
# Simulations used (with a uniform prior and zero value). Gumbel needs more in
# connect_four: sequential halving must give every candidate move enough visits for the
# deterministic interior selection to try all seven replies before the first halving.
SIMULATIONS = {
    ("tic_tac_toe", "puct"): 64,
    ("tic_tac_toe", "gumbel"): 64,
    ("connect_four", "puct"): 128,
    ("connect_four", "gumbel"): 256,
}
COPIES = 4


@pytest.mark.parametrize("algo", ["puct", "gumbel"])
@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four"])
def test_finds_wins_and_blocks(game, algo):
    env = azx.envs.make(game)
    cases = POSITIONS[game]
    states = play(env, [moves for moves, _ in cases for _ in range(COPIES)])
    simulations = SIMULATIONS[game, algo]
    if algo == "puct":
        search = PUCT(simulations, root_policy=PUCTRoot(temperature=0.0))
    else:
        search = Gumbel(simulations)
    output = search_uniform(search, env, states, jax.random.key(0))
    actions = np.asarray(output.action).reshape(len(cases), COPIES)
    for index, ((moves, answers), found) in enumerate(zip(cases, actions)):
        if algo == "gumbel" and (game, index) in PUCT_ONLY:
            continue
        assert set(found.tolist()) <= answers, (moves, found, answers)
    if algo == "puct":
        # PUCT concentrates its visits on the win, so the root value nears a full point.
        # (Gumbel's root value averages over the actions sequential halving compared.)
        values = np.asarray(output.root_value).reshape(len(cases), COPIES)
        assert np.all(values[0] > 0.5), values[0]


def test_values_are_for_the_player_to_move():
    env = azx.envs.make("tic_tac_toe")
    # X:0, O:1, X:4, O:8, X:6: X threatens 0-3-6 and 2-4-6 at once, so O, to move, is
    # lost; the root value is O's.
    # Same configuration and batch size as the tic_tac_toe case above: no new compile.
    states = play(env, [[0, 1, 4, 8, 6]] * len(POSITIONS["tic_tac_toe"]) * COPIES)
    search = PUCT(SIMULATIONS["tic_tac_toe", "puct"], root_policy=PUCTRoot(temperature=0.0))
    output = search_uniform(search, env, states, jax.random.key(1))
    assert np.all(np.asarray(output.root_value) < -0.5)
    assert jnp.all(output.policy_target.sum(axis=1) > 0.99)
