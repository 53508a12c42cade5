"""Referees written outside azx: pubeval and backgammon's points, checked against Tesauro's
formula written out point by point, pgx's own moves and the rules; 2048's expectimax player
and measure, checked against a NumPy expectimax over a NumPy 2048."""

import dataclasses
import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _optional import error_without
from pgx.backgammon import _calc_win_score, _legal_action_mask

import azx
from azx._evaluators import evaluator
from azx._numerics import third_party_numerics
from azx.arena import (
    BackgammonResult,
    Expectimax2048Agent,
    GnubgAgent,
    PubevalAgent,
    RandomAgent,
    ValueMoveAgent,
    backgammon_match,
    evaluate_2048,
    expectimax_values,
    heuristic_2048,
    opponent,
    play_match,
    pubeval_score,
    rule_points,
)
from azx.arena._match import mean_interval
from azx.arena._pubeval import (
    ALL_OFF_SCORE,
    CONTACT_WEIGHTS,
    RACE_WEIGHTS,
    best_move,
    full_moves,
    is_race,
)


BACKGAMMON = azx.envs.make("backgammon")
GAME_2048 = azx.envs.make("2048")
# pgx's starting board, seen by the player to move (own checkers positive, moving 0 -> 23).
START = [2, 0, 0, 0, 0, -5, 0, -3, 0, 0, 0, 5, -5, 0, 0, 0, 3, 0, 5, 0, 0, 0, 0, -2, 0, 0, 0, 0]


# --- pubeval ---------------------------------------------------------------------------


def tesauro_position(board):
    """A pgx board in the layout of Tesauro's pubeval.c: pos[1..24] the points numbered
    from the player's home (the player moves 24 -> 1), pos[0] the opponent's bar
    (negative), pos[25] the player's bar, pos[26] and pos[27] the checkers borne off."""
    pos = [0] * 28
    for point in range(24):
        pos[24 - point] = board[point]
    pos[0], pos[25], pos[26], pos[27] = board[25], board[24], board[26], board[27]
    return pos


def reference_pubeval(race, pos):
    """Tesauro's formula, input by input, in his numbering."""
    if pos[26] == 15:
        return ALL_OFF_SCORE
    weights = RACE_WEIGHTS if race else CONTACT_WEIGHTS
    score = weights[120] * -pos[0] / 2 + weights[121] * pos[26] / 15
    for j in range(1, 25):
        n, base = pos[25 - j], 5 * (j - 1)
        if n == -1:
            score += weights[base]
        elif n == 1:
            score += weights[base + 1]
        elif n == 2:
            score += weights[base + 2]
        elif n == 3:
            score += weights[base + 2] + weights[base + 3]
        elif n >= 4:
            score += weights[base + 2] + weights[base + 4] * (n - 3) / 2
    return score


def random_boards(count, seed):
    """Boards from random pgx games (the player to move's view), every 7th micro-action."""
    rng = np.random.default_rng(seed)
    step = jax.jit(BACKGAMMON.step)
    boards, states = [], []
    state = BACKGAMMON.init(jax.random.key(seed))
    for ply in itertools.count():
        if len(boards) == count:
            return boards, states
        if bool(state.terminated):
            state = BACKGAMMON.init(jax.random.key(seed + ply))
        if ply % 7 == 0:
            boards.append([int(x) for x in np.asarray(state._board)])
            states.append(state)
        action = rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask)))
        state = step(state, jnp.int32(action), jax.random.key(ply))


def test_pubeval_is_tesauros_formula():
    boards, _ = random_boards(40, seed=0)
    # Stacks of 4 to 15 (the (n - 3) / 2 input), a full bar, checkers off, a finished side.
    stacked = [0] * 28
    stacked[3], stacked[18], stacked[23], stacked[25], stacked[26] = 4, 7, -3, -2, 4
    stacked[5], stacked[10] = -1, -11
    all_off = [0] * 26 + [15, -3]
    all_off[2] = -12
    boards += [START, stacked, all_off]
    for race in (False, True):
        scores = pubeval_score(np.array(boards), race)
        expected = [reference_pubeval(race, tesauro_position(board)) for board in boards]
        np.testing.assert_allclose(scores, expected, rtol=1e-12, atol=1e-12)


def test_race_is_no_contact():
    race = [0] * 28
    race[20], race[22], race[26] = 5, 3, 7
    race[2], race[10], race[27] = -4, -6, -5
    assert is_race(race)
    assert not is_race(START)
    blocked = list(race)
    blocked[2], blocked[21] = -3, -1  # an opponent's checker behind the player's
    assert not is_race(blocked)
    on_bar = list(race)
    on_bar[22], on_bar[24] = 2, 1
    assert not is_race(on_bar)


def flip(board):
    """pgx's board seen by the other player."""
    board = np.asarray(board)
    return np.concatenate([-board[23::-1], -board[[25, 24, 27, 26]]])


@jax.jit
def _pgx_steps(states, actions):
    """pgx's own backgammon step on each row (compiled once per batch size, for every
    position the reference below expands)."""
    return jax.vmap(lambda s, a: BACKGAMMON.env.step(s, a, jax.random.key(0)))(states, actions)


def pgx_final_boards(state):
    """Every board (the mover's view) that pgx's own step reaches from `state` by playing
    micro-actions until the turn passes or the game ends: the brute-force reference."""
    turn = int(state._turn)
    frontier = jax.tree.map(lambda x: np.asarray(x)[None], state)
    finals, seen = set(), set()
    while frontier is not None:
        rows, actions = np.nonzero(np.asarray(frontier.legal_action_mask))
        pad = 128 * -(-len(rows) // 128)  # a few fixed sizes, to compile a few times
        rows = np.resize(rows, pad)
        actions = np.resize(actions, pad)
        with third_party_numerics():
            out = jax.device_get(_pgx_steps(jax.tree.map(lambda x: x[rows], frontier), actions))
        keep = []
        for i in range(pad):
            board = np.asarray(out._board[i])
            if out.terminated[i]:
                finals.add(tuple(board.tolist()))
            elif out._turn[i] != turn:
                finals.add(tuple(flip(board).tolist()))
            elif (
                key := (tuple(board.tolist()), tuple(out._playable_dice[i].tolist()))
            ) not in seen:
                seen.add(key)
                keep.append(i)
        frontier = jax.tree.map(lambda x: x[np.array(keep)], out) if keep else None
    return finals


def state_with(board, dice):
    """A pgx state of the player to move, with `board` and the dice `dice` to play."""
    die = np.array([d - 1 for d in dice] + [-1] * (4 - len(dice)), np.int32)
    return BACKGAMMON.init(jax.random.key(0)).replace(
        _board=jnp.asarray(board, jnp.int32),
        _dice=jnp.asarray(die[:2]),
        _playable_dice=jnp.asarray(die),
        legal_action_mask=jnp.asarray(legal_mask_for(board, dice)),
    )


@pytest.mark.slow  # the benchmarks' backgammon referee, against pgx on many boards
def test_full_moves_are_pgx_moves():
    _, states = random_boards(12, seed=3)
    # Bearing off: exact and larger dice, a checker left behind, a win within the roll.
    bear_off = [0] * 28
    bear_off[18], bear_off[20], bear_off[21], bear_off[23], bear_off[26] = 3, 2, 4, 1, 5
    bear_off[2], bear_off[19], bear_off[27] = -12, -1, -2
    behind = list(bear_off)
    behind[18], behind[15] = 2, 1
    last = [0] * 28
    last[22], last[23], last[26], last[4], last[27] = 1, 1, 13, -15, 0
    for board, dice in [
        (START, [1, 1, 1, 1]),
        (START, [5, 2]),
        (bear_off, [6, 6, 6, 6]),
        (bear_off, [5, 3]),
        (behind, [4, 4, 4, 4]),
        (last, [2, 1]),
    ]:
        states.append(state_with(board, dice))
    for state in states:
        board = np.asarray(state._board)
        dice = [int(die) + 1 for die in np.asarray(state._playable_dice) if die >= 0]
        assert set(full_moves(board, dice)) == pgx_final_boards(state), (board.tolist(), dice)


def legal_mask_for(board, dice):
    with third_party_numerics():
        return _legal_action_mask(jnp.asarray(board), jnp.asarray([d - 1 for d in dice]))


def play(board, actions):
    from azx.arena._pubeval import _apply

    for action in actions:
        board = _apply(board, action) if action // 6 else board
    return board


@pytest.mark.parametrize(
    ("dice", "made"),
    [
        # The opening moves every backgammon book gives: 3-1 and 4-2 make a point in the
        # home board (8/5 6/5, 8/4 6/4), 6-6 is 24/18(2) 13/7(2), 6-5 runs 24/13.
        ([3, 1], {16: 2, 18: 4, 19: 2}),
        ([4, 2], {16: 2, 18: 4, 20: 2}),
        ([6, 6, 6, 6], {0: 0, 6: 2, 11: 3, 17: 2}),
        ([6, 5], {0: 1, 11: 6}),
    ],
)
def test_pubeval_plays_the_standard_openings(dice, made):
    final = play(START, best_move(START, dice, is_race(START)))
    assert {point: final[point] for point in made} == made


def test_pubeval_bears_off_to_win_and_hits():
    home = [0] * 28
    home[22], home[23], home[26] = 1, 1, 13
    home[3], home[27] = -15, 0
    assert play(home, best_move(home, [2, 1], False))[26] == 15
    # A lone opponent's checker four points in front of the player's stack: 4-2 can hit it.
    hit = [0] * 28
    hit[16], hit[18], hit[12] = 4, 5, 6
    hit[20], hit[5], hit[7] = -1, -9, -5
    final = play(hit, best_move(hit, [4, 2], is_race(hit)))
    assert final[25] == -1 and final[20] > 0


@pytest.mark.slow  # whole games of a referee against random
def test_pubeval_beats_random_by_a_wide_margin():
    match = eqx.filter_jit(backgammon_match)
    result = match(BACKGAMMON, PubevalAgent(), RandomAgent(), num_games=100, key=jax.random.key(0))
    low, _ = result.interval()
    assert result.num_unfinished == 0
    assert sum(result.counts[points] for points in (1, 2, 3)) >= 95
    assert low > 1.5


# --- backgammon's points ---------------------------------------------------------------


def finished_board(loser_off, loser_home=0, loser_bar=0):
    board = [0] * 28
    board[26], board[27] = 15, -loser_off
    board[20] = -loser_home
    board[25] = -loser_bar
    board[5] = -(15 - loser_off - loser_home - loser_bar)
    return jnp.asarray(board)


@pytest.mark.parametrize(
    ("board", "points", "pgx_points"),
    [
        (finished_board(loser_off=3), 1, 1),
        (finished_board(loser_off=0), 2, 2),
        (finished_board(loser_off=0, loser_home=1), 3, 3),
        # A checker on the bar makes a backgammon by the rules; pgx's reward misses it.
        (finished_board(loser_off=0, loser_bar=1), 3, 2),
        (finished_board(loser_off=2, loser_home=1, loser_bar=1), 1, 1),
    ],
)
def test_rule_points(board, points, pgx_points):
    assert int(rule_points(board)) == points
    with third_party_numerics():
        assert int(_calc_win_score(board)) == pgx_points


@pytest.mark.slow
def test_backgammon_match_agrees_with_play_match():
    key = jax.random.key(5)
    result = eqx.filter_jit(backgammon_match)(
        BACKGAMMON, RandomAgent(), PubevalAgent(), num_games=20, key=key
    )
    outcome = eqx.filter_jit(play_match)(
        BACKGAMMON, RandomAgent(), PubevalAgent(), num_games=20, key=key
    ).outcome
    np.testing.assert_array_equal(np.sign(result.points), outcome)
    assert set(np.abs(np.asarray(result.points)).tolist()) <= {1, 2, 3}
    counts = result.counts
    assert sum(counts.values()) == 20
    assert result.points_per_game == pytest.approx(
        sum(points * count for points, count in counts.items()) / 20
    )


def test_backgammon_match_refuses_other_games():
    with pytest.raises(ValueError, match="backgammon"):
        backgammon_match(
            GAME_2048, RandomAgent(), RandomAgent(), num_games=2, key=jax.random.key(0)
        )


def test_mean_interval():
    low, high = mean_interval(np.array([0.0, 2.0]))
    # mean 1, sample standard deviation sqrt(2), standard error 1, z = 1.95996...
    assert (low, high) == pytest.approx((1 - 1.959964, 1 + 1.959964), abs=1e-5)
    with pytest.raises(ValueError, match="confidence"):
        mean_interval(np.array([0.0, 2.0]), 1.5)
    result = BackgammonResult(
        points=jnp.array([3, -1, 1, 1]),
        a_moved_first=jnp.array([True, True, False, False]),
        finished=jnp.ones(4, bool),
    )
    assert result.points_per_game == 1.0
    assert result.interval() == pytest.approx(mean_interval(np.array([3, -1, 1, 1])))


# --- 2048 --------------------------------------------------------------------------------


def numpy_slide(board, action):
    """pgx's 2048 move on an exponent board (0 left, 1 up, 2 right, 3 down), and whether
    it changes the board: rows turned so that the move is a slide to the left."""
    square = np.rot90(np.asarray(board).reshape(4, 4), action)
    rows = []
    for row in square:
        tiles = [int(t) for t in row if t]
        merged = []
        while tiles:
            if len(tiles) > 1 and tiles[0] == tiles[1]:
                merged.append(tiles[0] + 1)
                tiles = tiles[2:]
            else:
                merged.append(tiles.pop(0))
        rows.append(merged + [0] * (4 - len(merged)))
    slid = np.rot90(np.array(rows), -action).reshape(16)
    return slid, not np.array_equal(slid, board)


def numpy_heuristic(board):
    square = np.asarray(board).reshape(4, 4)
    total = 0.0
    for line in list(square) + list(square.T):
        rank = line.astype(np.float64)
        up = sum(max(rank[i + 1] ** 4 - rank[i] ** 4, 0) for i in range(3))
        down = sum(max(rank[i] ** 4 - rank[i + 1] ** 4, 0) for i in range(3))
        merges = sum(1 for i in range(3) if line[i] and line[i] == line[i + 1])
        total += (
            200_000
            + 270 * np.sum(line == 0)
            + 700 * merges
            - 47 * min(up, down)
            - 11 * np.sum(rank**3.5)
        )
    return total


def numpy_expectimax(board, decisions):
    """The value of `board` with `decisions` moves to search, each followed by chance."""
    if decisions == 0:
        return numpy_heuristic(board)
    values = [
        numpy_chance(slid, decisions - 1)
        for slid, legal in (numpy_slide(board, action) for action in range(4))
        if legal
    ]
    return max(values, default=-1e9)


def numpy_chance(after, decisions):
    empty = np.flatnonzero(after == 0)
    value = 0.0
    for cell, (tile, probability) in itertools.product(empty, ((1, 0.9), (2, 0.1))):
        board = after.copy()
        board[cell] = tile
        value += probability / len(empty) * numpy_expectimax(board, decisions)
    return value


def board_2048(rows):
    return np.array(rows, np.int32).reshape(16)


BOARDS_2048 = [
    board_2048([[1, 1, 2, 3], [0, 2, 0, 4], [5, 0, 1, 0], [6, 7, 3, 2]]),
    board_2048([[3, 4, 5, 6], [2, 3, 4, 5], [1, 2, 3, 0], [1, 0, 0, 1]]),
    board_2048([[11, 10, 9, 1], [2, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]]),
]


@pytest.mark.parametrize("board", BOARDS_2048)
def test_heuristic_2048(board):
    assert float(heuristic_2048(jnp.asarray(board))) == pytest.approx(
        numpy_heuristic(board), rel=1e-6
    )


@pytest.mark.parametrize(("board", "depth"), [(b, d) for b in BOARDS_2048 for d in (1, 2)])
def test_expectimax_values(board, depth):
    values = np.asarray(jax.jit(expectimax_values, static_argnums=1)(jnp.asarray(board), depth))
    for action in range(4):
        slid, legal = numpy_slide(board, action)
        if legal:
            expected = numpy_chance(slid, depth - 1)
            assert values[action] == pytest.approx(expected, rel=1e-5), action


@pytest.mark.slow  # whole games of a referee against random
def test_expectimax_outscores_random():
    evaluate = eqx.filter_jit(evaluate_2048)
    key = jax.random.key(0)
    random = evaluate(GAME_2048, RandomAgent(), num_games=16, key=key)
    assert random.num_unfinished == 0
    # In 250 moves the expectimax player loses no game and scores above random's whole games.
    expectimax = evaluate(GAME_2048, Expectimax2048Agent(2), num_games=4, key=key, max_moves=250)
    assert expectimax.num_unfinished == 4
    assert expectimax.mean_score > random.interval()[1]


def test_evaluate_2048_measures():
    key = jax.random.key(1)
    result = eqx.filter_jit(evaluate_2048)(GAME_2048, RandomAgent(), num_games=8, key=key)
    returns, _ = eqx.filter_jit(azx.arena.episode_returns)(
        GAME_2048, RandomAgent(), num_games=8, key=key, max_moves=100_000
    )
    np.testing.assert_array_equal(result.score, returns)
    shares = result.tile_shares
    assert shares[2] == 1.0
    assert list(shares.values()) == sorted(shares.values(), reverse=True)
    top = int(np.max(result.largest_tile))
    assert shares[top] == pytest.approx(np.mean(np.asarray(result.largest_tile) == top))
    # Every merge adds the tile it makes: a game whose largest tile is 2^k scored at least 2^k.
    assert np.all(np.asarray(result.score) >= np.asarray(result.largest_tile))
    # Scaled rewards (what the 2048 preset trains on) leave the game's score as it is.
    scaled = azx.envs.ScaleRewards(azx.envs.ScaleRewards(GAME_2048, 0.5), 0.01)
    again = eqx.filter_jit(evaluate_2048)(scaled, RandomAgent(), num_games=8, key=key)
    np.testing.assert_allclose(again.score, result.score, rtol=1e-6)
    np.testing.assert_array_equal(again.largest_tile, result.largest_tile)


# --- opponents by name ---------------------------------------------------------------------


def test_opponent_specs():
    assert isinstance(opponent("pubeval", BACKGAMMON), PubevalAgent)
    assert opponent("expectimax", GAME_2048).depth == 2
    assert opponent("expectimax:1", GAME_2048).depth == 1
    with pytest.raises(ValueError, match="backgammon only"):
        opponent("pubeval", GAME_2048)
    with pytest.raises(ValueError, match="2048 only"):
        opponent("expectimax", BACKGAMMON)
    with pytest.raises(ValueError, match="depth of 1 or 2"):
        opponent("expectimax:3", GAME_2048)
    with pytest.raises(ValueError, match="not understood"):
        opponent("pubeval:2", BACKGAMMON)
    with pytest.raises(ValueError, match="depth must be 1 or 2"):
        Expectimax2048Agent(3)


def test_agents_refuse_other_games():
    with pytest.raises(ValueError, match="PubevalAgent plays pgx's backgammon"):
        PubevalAgent().init(GAME_2048, 2)
    with pytest.raises(ValueError, match="Expectimax2048Agent plays pgx's 2048"):
        Expectimax2048Agent().init(BACKGAMMON, 2)
    with pytest.raises(ValueError, match="evaluate_2048 plays pgx's 2048"):
        evaluate_2048(BACKGAMMON, RandomAgent(), num_games=2, key=jax.random.key(0))


# --- GNU Backgammon ----------------------------------------------------------------------


def _flip(board):
    """pgx's board seen by the other player."""
    flipped = [-count for count in board[23::-1]] + [-board[25], -board[24]]
    return flipped + [-board[27], -board[26]]


def test_gnubg_opponent_specs():
    pytest.importorskip("gnubg")  # in azx[dev]
    assert opponent("gnubg", BACKGAMMON).level == "expert"
    assert opponent("gnubg:beginner", BACKGAMMON).level == "beginner"
    with pytest.raises(ValueError, match="gnubg takes a level of beginner, casual, "):
        opponent("gnubg:weak", BACKGAMMON)
    with pytest.raises(ValueError, match="backgammon only"):
        opponent("gnubg", GAME_2048)
    with pytest.raises(ValueError, match=r"level must be one of \['beginner', .*got 'x'"):
        GnubgAgent("x")
    with pytest.raises(ValueError, match="GnubgAgent plays pgx's backgammon"):
        GnubgAgent().init(GAME_2048, 2)


def test_gnubg_is_optional():
    assert "pip install 'azx[gnubg]'" in error_without("gnubg", "gnubg")


def test_gnubg_agent_plays_gnubgs_own_best_move():
    gnubg = pytest.importorskip("gnubg")  # in azx[dev]
    from azx.arena._gnubg import gnubg_board

    agent = opponent("gnubg", BACKGAMMON)
    context, cube = gnubg.evalcontext(0, 0, 1, 0, 0.0), gnubg.cubeinfo()
    rolls = [[a, b] if a != b else [a] * 4 for a in range(1, 7) for b in range(a, 7)]
    rng = np.random.default_rng(0)
    positions = [(START, roll) for roll in rolls]
    board = START
    for _ in range(120):  # a game of random full moves, both sides, from the start
        roll = rolls[rng.integers(len(rolls))]
        finals = list(full_moves(board, roll))
        board = list(finals[rng.integers(len(finals))])
        if board[26] == 15:
            break
        board = _flip(board)
        positions.append((board, rolls[rng.integers(len(rolls))]))
    assert len(positions) > 60
    same = 0
    for board, roll in positions:
        final = play(board, agent.choose(np.array(board), roll))
        on_roll = tuple(reversed(gnubg_board(board)))  # gnubg's order: the mover second
        theirs = gnubg.findbestmoves(on_roll, cube, context, tuple(roll[:2]))
        if not theirs:  # no checker can move: neither moves
            assert list(final) == list(board)
            same += 1
            continue
        # gnubg's score of its best move: the mover's equity after it, at 0 ply.
        best = theirs[0]["score"]
        ours = 3.0 if final[26] == 15 else -gnubg.evaluate(gnubg_board(final), cube, context)[-1]
        # pgx allows every move the rules do (and a few more: one die where both could be
        # played), so the agent's move is worth at least gnubg's best, and as much where
        # the rules' moves are all pgx has.
        assert ours >= best - 1e-5, (board, roll, ours, best)
        same += abs(ours - best) < 1e-5
    assert same >= len(positions) - 3, (same, len(positions))


# --- the network's own full-move player --------------------------------------------------


def reference_move_values(env, net, state):
    """Every final position of the turn from `state`, reached by pgx's own micro-actions
    through the chance adapter, with minus the network's value for the opponent averaged
    over the adapter's outcomes and probabilities (None for a position that wins)."""
    afterstate = jax.jit(env.afterstate)
    apply_outcome = jax.jit(env.apply_outcome)
    rolls = jax.jit(jax.vmap(env.apply_outcome, in_axes=(None, 0)))
    value = jax.jit(jax.vmap(lambda s: net(env.observation(s))[1]))
    values, seen = {}, set()

    def walk(state):
        key = (tuple(np.asarray(state._board).tolist()), tuple(np.asarray(state._playable_dice)))
        if key in seen:
            return
        seen.add(key)
        for action in np.flatnonzero(np.asarray(state.legal_action_mask)):
            with third_party_numerics():
                after = afterstate(state, jnp.int32(action))
            board = np.asarray(after.state._board)
            if bool(after.state.terminated):
                values[tuple(board.tolist())] = None
            elif bool(after.chance):  # the turn passed: the board is the opponent's
                with third_party_numerics():
                    opponent = rolls(after, jnp.arange(env.num_outcomes))
                    probabilities = np.asarray(env.chance_probabilities(after))
                expected = float(probabilities @ np.asarray(value(opponent)))
                values[tuple(flip(board).tolist())] = -expected
            else:
                with third_party_numerics():
                    walk(apply_outcome(after, jnp.int32(0)))

    walk(state)
    return values


# Slow tier (the benchmarks' backgammon referee, a network over 21 outcomes of many
# positions), with the preset's encoding and pgx's own.
@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["unary", "pgx"])
def test_value_move_agent_rates_moves_through_the_chance_adapter(encoding):
    """The agent's own board turning and dice table against pgx's steps and the adapter's
    21 outcomes: the same final positions, the same values, and its move the best."""
    env = azx.envs.make("backgammon", encoding=encoding)
    net = azx.nets.MLP(
        env.observation_shape, env.num_actions, width=32, depth=1, key=jax.random.key(1)
    )
    agent = ValueMoveAgent(net, env)
    _, states = random_boards(3, seed=5)
    # 6-1 bears off the last two checkers, or moves one and bears the other off: the win
    # outranks every value.
    home = [0] * 28
    home[18], home[23], home[26], home[3], home[27] = 1, 1, 13, -15, 0
    states.append(state_with(home, [6, 1]))
    for state in states:
        board = np.asarray(state._board)
        dice = [int(die) + 1 for die in np.asarray(state._playable_dice) if die >= 0]
        reference = reference_move_values(env, net, state)
        values = agent.move_values(board, dice)
        assert set(values) == set(reference), (board.tolist(), dice)
        for position, expected in reference.items():
            if expected is None:
                assert values[position] == 1e6 + int(rule_points(jnp.asarray(position)))
            else:
                assert values[position] == pytest.approx(expected, abs=1e-5)
        chosen = tuple(play(board.tolist(), agent.choose(board, dice)))
        assert values[chosen] == max(values.values())
    assert None in reference.values() and len(set(reference.values())) > 1  # wins and not
    assert chosen[26] == 15
    # Called as an arena agent (jitted, the network handed to the host callback), it plays
    # the first micro-action of the same move.
    batch = jax.tree.map(lambda *leaves: jnp.stack(leaves), *states)
    actions, _ = eqx.filter_jit(agent.__call__)(
        env, agent.init(env, len(states)), batch, key=jax.random.key(0)
    )
    for state, action in zip(states, np.asarray(actions), strict=True):
        board = np.asarray(state._board)
        dice = [int(die) + 1 for die in np.asarray(state._playable_dice) if die >= 0]
        assert action == agent.choose(board, dice)[0]


def test_value_move_agent_refuses_other_games_and_observations():
    net = azx.nets.MLP((9,), 9, width=8, depth=1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="ValueMoveAgent plays pgx's backgammon"):
        ValueMoveAgent(net, azx.envs.make("tic_tac_toe"))
    flat = azx.envs.ObserveLegalMoves(azx.envs.make("backgammon"))
    with pytest.raises(ValueError, match=r"pgx observation of shape \(34,\)"):
        ValueMoveAgent(net, flat)


@pytest.mark.slow  # a backgammon preset built and two whole games
def test_backgammon_preset_evaluates_its_full_move_agent():
    """The preset's recipe builds the full-move agent for its own environment, and
    `azx train`'s evaluation plays it; another game's recipe refuses it by name."""
    preset = azx.presets.get("backgammon")
    recipe = dataclasses.replace(
        preset.recipe, eval_agents=("full-move",), eval_opponents=("random",), eval_games=2
    )
    trainer, state = preset.build(seed=0)
    judge = evaluator(recipe, trainer.env)
    results = judge.evaluate(trainer, state, key=jax.random.key(0), phase=lambda _: None)
    record = results["full-move"]["random"]
    assert record["wins"] + record["draws"] + record["losses"] == 2
    with pytest.raises(ValueError, match="plays backgammon; this game is 'tic_tac_toe'"):
        evaluator(recipe, azx.envs.make("tic_tac_toe")).check_training()
