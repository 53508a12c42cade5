"""Arena: agents against known game values, matches, and Elo against known answers."""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import azx
from azx.arena import (
    GreedyAgent,
    MatchResult,
    NetworkAgent,
    RandomAgent,
    RandomOpening,
    RolloutMCTSAgent,
    SearchAgent,
    TicTacToeSolver,
    elo_ratings,
    episode_returns,
    play_episodes,
    play_match,
)


TIC_TAC_TOE = azx.envs.make("tic_tac_toe")
CONNECT_FOUR = azx.envs.make("connect_four")


@functools.cache
def solver() -> TicTacToeSolver:
    return TicTacToeSolver()


@functools.partial(eqx.filter_jit, donate="none")
def jit_match(env, agent_a, agent_b, key, num_games, max_moves=None):
    return play_match(env, agent_a, agent_b, num_games=num_games, key=key, max_moves=max_moves)


@functools.partial(eqx.filter_jit, donate="none")
def jit_act(env, agent, state, key):
    batch_size = jax.tree.leaves(state)[0].shape[0]
    action, _ = agent(env, agent.init(env, batch_size), state, key=key)
    return action


@functools.partial(eqx.filter_jit, donate="none")
def _play_moves(env, moves):
    def play(moves):
        def step(state, action):
            # -1 pads shorter move lists: no move.
            stepped = env.step(state, jnp.maximum(action, 0), jax.random.key(0))
            state = jax.tree.map(lambda new, old: jnp.where(action >= 0, new, old), stepped, state)
            return state, None

        return jax.lax.scan(step, env.init(jax.random.key(0)), moves)[0]

    return jax.vmap(play)(moves)


def positions(env, games: list[list[int]]):
    """A batch of states, one per move sequence."""
    length = max(1, max(len(moves) for moves in games))
    padded = [moves + [-1] * (length - len(moves)) for moves in games]
    return _play_moves(env, jnp.asarray(padded, jnp.int32))


# Cells: 0 1 2 / 3 4 5 / 6 7 8. Each position: (moves so far, the only winning/saving move).
WINS_IN_ONE = [
    ([0, 3, 1, 4], 2),  # X completes the top row (O's threat at 5 is ignored)
    ([0, 3, 1, 4, 8], 5),  # O completes the middle row although X threatens 2
    ([4, 0, 2, 1], 6),  # X wins on the anti-diagonal
]
FORCED_BLOCKS = [
    ([0, 4, 1], 2),  # O must block the top row
    ([4, 0, 8, 2], 1),  # X must block O's top row
]


def test_solver_empty_board_is_a_draw():
    state = positions(TIC_TAC_TOE, [[]])
    assert int(solver().value(TIC_TAC_TOE, state)[0]) == 0
    result = jit_match(TIC_TAC_TOE, solver(), solver(), jax.random.key(0), 40)
    assert result.counts == (0, 40, 0)
    assert bool(jnp.all(result.finished))


def test_solver_known_positions():
    wins = positions(TIC_TAC_TOE, [moves for moves, _ in WINS_IN_ONE])
    assert jnp.all(solver().value(TIC_TAC_TOE, wins) == 1)
    blocks = [positions(TIC_TAC_TOE, [moves]) for moves, _ in FORCED_BLOCKS]
    for state in blocks:  # the blocked side draws with perfect play
        assert int(solver().value(TIC_TAC_TOE, state)[0]) == 0
    for seed in range(5):
        key = jax.random.key(seed)
        action = jit_act(TIC_TAC_TOE, solver(), wins, key)
        assert action.tolist() == [best for _, best in WINS_IN_ONE]
        for state, (_, best) in zip(blocks, FORCED_BLOCKS):
            assert int(jit_act(TIC_TAC_TOE, solver(), state, key)[0]) == best


def test_solver_never_loses_to_random():
    result = jit_match(TIC_TAC_TOE, solver(), RandomAgent(), jax.random.key(1), 300)
    assert result.losses == 0
    wins_first, _, _ = result.as_first
    assert wins_first >= 0.9 * 150
    assert result.wins >= 0.75 * 300


def test_match_colours_alternate_and_counts_add_up():
    result = jit_match(TIC_TAC_TOE, solver(), RandomAgent(), jax.random.key(2), 100)
    assert isinstance(result, MatchResult)
    assert sum(result.counts) == result.num_games == 100
    assert sum(result.as_first) == sum(result.as_second) == 50
    assert tuple(map(sum, zip(result.as_first, result.as_second))) == result.counts
    assert result.a_moved_first.tolist() == [True] * 50 + [False] * 50
    # In tic-tac-toe the winner makes the last move: the first mover wins on odd moves.
    won = np.asarray(result.outcome) == 1
    odd = np.asarray(result.num_moves) % 2 == 1
    assert np.all(odd[won] == np.asarray(result.a_moved_first)[won])
    low, high = result.score_interval()
    assert 0 <= low <= result.score <= high <= 1
    # Swapping the agents mirrors the result.
    mirrored = jit_match(TIC_TAC_TOE, RandomAgent(), solver(), jax.random.key(3), 100)
    assert mirrored.wins == 0


def test_random_opening_plays_random_plies_then_the_agent():
    random = RandomAgent()
    # No random plies: the solver never loses. Every ply random: the side is a random
    # player, which loses some of 200 games against a random player.
    assert (
        jit_match(TIC_TAC_TOE, RandomOpening(solver(), 0), random, jax.random.key(5), 200).losses
        == 0
    )
    assert (
        jit_match(TIC_TAC_TOE, RandomOpening(solver(), 9), random, jax.random.key(5), 200).losses
        > 0
    )


def test_random_opening_varies_games_between_deterministic_agents():
    # Perfect play from the empty board draws; after two random plies many positions are
    # won for one side (a corner answered anywhere but the centre, the centre answered on
    # an edge), which the solver converts.
    def match(plies):
        a, b = RandomOpening(solver(), plies), RandomOpening(solver(), plies)
        return jit_match(TIC_TAC_TOE, a, b, jax.random.key(6), 100)

    assert match(0).counts == (0, 100, 0)
    decided = match(2)
    assert decided.wins > 0 and decided.losses > 0
    # Two plies cannot lose the game for the side to move next (the first player), so
    # every decided game is the first player's.
    assert decided.as_first[2] == 0 and decided.as_second[0] == 0
    with pytest.raises(ValueError, match="plies"):
        RandomOpening(solver(), -1)


def test_max_moves_stops_games():
    result = jit_match(TIC_TAC_TOE, RandomAgent(), RandomAgent(), jax.random.key(4), 10, 3)
    assert np.all(np.asarray(result.num_moves) == 3)
    assert result.num_unfinished == 10 and result.counts == (0, 10, 0)


@eqx.filter_jit
def replay_start(env, key):
    state = env.init(key)
    return state, env.current_player(state), env.terminated(state) | env.truncated(state)


@eqx.filter_jit
def replay_step(env, state, action, key):
    state = env.step(state, action, key)
    return state, env.rewards(state), env.terminated(state) | env.truncated(state)


def replayed_outcomes(env, result, game_moves):
    """Each game played again from its kept actions and keys alone, one step at a time:
    its outcome for agent_a (whose player id the first mover's tells) and its moves."""
    outcomes = []
    actions = np.asarray(result.actions)
    for game in range(result.num_games):
        state, first, over = replay_start(env, result.init_keys[game])
        a_player = int(first) if bool(result.a_moved_first[game]) else 1 - int(first)
        returns = np.zeros(2, np.float32)
        moves = 0
        while not bool(over) and moves < game_moves:
            action = jnp.int32(actions[moves, game])
            state, rewards, over = replay_step(env, state, action, result.step_keys[moves, game])
            returns += np.asarray(rewards)
            moves += 1
        outcomes.append((int(np.sign(returns[a_player] - returns[1 - a_player])), moves))
    return outcomes


@functools.partial(eqx.filter_jit, donate="none")
def jit_kept_match(env, agent_a, agent_b, key, num_games, keep_actions):
    return play_match(
        env, agent_a, agent_b, num_games=num_games, key=key, keep_actions=keep_actions
    )


def test_kept_actions_replay_the_same_games():
    key = jax.random.key(8)
    plain = jit_match(TIC_TAC_TOE, RandomAgent(), RandomAgent(), key, 8)
    assert plain.actions is None and plain.init_keys is None and plain.step_keys is None
    kept = jit_kept_match(TIC_TAC_TOE, RandomAgent(), RandomAgent(), key, 8, 9)
    for field in ("outcome", "a_moved_first", "finished", "num_moves"):
        np.testing.assert_array_equal(getattr(kept, field), getattr(plain, field))
    actions, num_moves = np.asarray(kept.actions), np.asarray(kept.num_moves)
    assert actions.shape == (9, 8)
    played = np.arange(9)[:, None] < num_moves[None, :]
    assert np.all((actions >= 0) == played) and np.all(actions[~played] == -1)
    replayed = replayed_outcomes(TIC_TAC_TOE, kept, 9)
    assert replayed == list(zip(np.asarray(kept.outcome).tolist(), num_moves.tolist()))
    # Fewer kept than played: the first moves of the same games.
    short = jit_kept_match(TIC_TAC_TOE, RandomAgent(), RandomAgent(), key, 8, 3)
    np.testing.assert_array_equal(short.actions, actions[:3])
    np.testing.assert_array_equal(short.outcome, plain.outcome)
    with pytest.raises(ValueError, match="keep_actions"):
        play_match(TIC_TAC_TOE, RandomAgent(), RandomAgent(), num_games=2, key=key, keep_actions=-1)


@pytest.mark.slow  # backgammon's steps compile
def test_kept_keys_replay_the_dice():
    env = azx.envs.make("backgammon")
    key = jax.random.key(9)
    kept = jit_kept_match(env, RandomAgent(), RandomAgent(), key, 2, 2048)
    assert int(np.max(kept.num_moves)) < 2048 and np.all(np.asarray(kept.finished))
    replayed = replayed_outcomes(env, kept, 2048)
    expected = zip(np.asarray(kept.outcome).tolist(), np.asarray(kept.num_moves).tolist())
    assert replayed == list(expected)


def test_kept_episodes_replay_their_returns():
    # 2048: each episode's start and each new tile come from the kept keys.
    env, key = azx.envs.make("2048"), jax.random.key(10)
    returns, finished = eqx.filter_jit(episode_returns)(env, RandomAgent(), num_games=3, key=key)
    kept = eqx.filter_jit(play_episodes)(
        env, RandomAgent(), num_games=3, key=key, keep_actions=1024
    )
    np.testing.assert_array_equal(kept.returns, returns)
    np.testing.assert_array_equal(kept.finished, finished)
    actions, num_moves = np.asarray(kept.actions), np.asarray(kept.num_moves)
    assert int(num_moves.max()) < 1024 and np.all(np.asarray(finished))
    played = np.arange(1024)[:, None] < num_moves[None, :]
    assert np.all((actions >= 0) == played) and np.all(actions[~played] == -1)
    for episode in range(3):
        state, _, over = replay_start(env, kept.init_keys[episode])
        total, moves = np.float32(0.0), 0
        while not bool(over):
            action = jnp.int32(actions[moves, episode])
            state, rewards, over = replay_step(env, state, action, kept.step_keys[moves, episode])
            total, moves = np.float32(total + np.asarray(rewards)[0]), moves + 1
        assert moves == num_moves[episode] and total == returns[episode]
    with pytest.raises(ValueError, match="keep_actions"):
        play_episodes(env, RandomAgent(), num_games=2, key=key, keep_actions=0)


def test_random_agent_plays_only_legal_moves():
    state = positions(TIC_TAC_TOE, [[0, 4, 8, 2, 6]] * 64)
    legal = jax.vmap(TIC_TAC_TOE.legal_action_mask)(state)
    action = jit_act(TIC_TAC_TOE, RandomAgent(), state, jax.random.key(5))
    assert jnp.all(legal[jnp.arange(64), action])
    assert set(action.tolist()) == {1, 3, 5, 7}  # all four legal moves appear


def test_greedy_takes_immediate_wins():
    wins = positions(TIC_TAC_TOE, [moves for moves, _ in WINS_IN_ONE])
    for seed in range(3):
        action = jit_act(TIC_TAC_TOE, GreedyAgent(), wins, jax.random.key(seed))
        assert action.tolist() == [best for _, best in WINS_IN_ONE]


# Connect four: columns 0..6. After these moves the player to move wins in column 3
# (three in a row at the bottom: 0, 1, 2 by the first player; the second stacks on 0..2).
C4_WIN_IN_ONE = [0, 0, 1, 1, 2, 2]


def test_rollout_mcts_finds_a_win_in_one():
    state = positions(CONNECT_FOUR, [C4_WIN_IN_ONE] * 4)
    action = jit_act(CONNECT_FOUR, RolloutMCTSAgent(100), state, jax.random.key(6))
    assert action.tolist() == [3] * 4


def test_rollout_mcts_beats_random_at_connect_four():
    result = jit_match(CONNECT_FOUR, RolloutMCTSAgent(32), RandomAgent(), jax.random.key(7), 20)
    assert result.wins >= 18, str(result)


def test_network_and_search_agents_play_legal_games():
    net = azx.nets.UniformPolicy(TIC_TAC_TOE.num_actions)
    search = azx.search.make("puct", 32, temperature=0.0, dirichlet_fraction=0.0, reuse_tree=True)
    result = jit_match(
        TIC_TAC_TOE, SearchAgent(net, search), NetworkAgent(net), jax.random.key(8), 20
    )
    assert sum(result.counts) == 20 and bool(jnp.all(result.finished))
    # A uniform "network" alone plays the first legal cell; search on game rewards
    # alone must not lose to it.
    assert result.losses == 0, str(result)


def test_agent_arguments_are_checked():
    with pytest.raises(ValueError, match="num_simulations"):
        RolloutMCTSAgent(0)
    with pytest.raises(ValueError, match="exploration"):
        RolloutMCTSAgent(10, exploration=-1.0)
    with pytest.raises(ValueError, match="even"):
        play_match(TIC_TAC_TOE, RandomAgent(), RandomAgent(), num_games=3, key=jax.random.key(0))
    with pytest.raises(ValueError, match="tic_tac_toe"):
        state = positions(CONNECT_FOUR, [[]])
        solver()(CONNECT_FOUR, solver().init(CONNECT_FOUR, 1), state, key=jax.random.key(0))


# Elo


def test_elo_two_players_exact():
    for wins, draws, losses in [(75, 0, 25), (60, 20, 20), (1, 8, 1)]:
        ratings = elo_ratings({("a", "random"): (wins, draws, losses)})
        p = (wins + draws / 2) / (wins + draws + losses)
        assert ratings["random"] == (0.0, 0.0, 0.0)
        rating, low, high = ratings["a"]
        assert rating == pytest.approx(400 * math.log10(p / (1 - p)), abs=1e-9)
        # Standard error of a log-odds estimate: 1 / sqrt(n p (1 - p)) nats.
        n = wins + draws + losses
        half = 1.959964 * 400 / math.log(10) / math.sqrt(n * p * (1 - p))
        assert (high - rating) == pytest.approx(half, rel=1e-4)
        assert (rating - low) == pytest.approx(half, rel=1e-4)


def test_elo_recovers_known_ratings():
    truth = {"random": 0.0, "greedy": 150.0, "mcts": 420.0, "net": 700.0}
    names = list(truth)
    results = {}
    games = 200_000
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            p = 1 / (1 + 10 ** ((truth[b] - truth[a]) / 400))
            draws = round(0.4 * min(p, 1 - p) * games)
            wins = round(p * games - draws / 2)
            results[(a, b)] = (wins, draws, games - wins - draws)
    ratings = elo_ratings(results)
    for name, rating in truth.items():
        estimate, low, high = ratings[name]
        assert estimate == pytest.approx(rating, abs=0.5)
        if name != "random":
            assert low < rating < high and high - low < 10


def test_elo_rejects_infinite_and_undetermined_ratings():
    with pytest.raises(ValueError, match="won every game"):
        elo_ratings({("solver", "random"): (10, 0, 0), ("greedy", "random"): (5, 0, 5)})
    with pytest.raises(ValueError, match="no chain of games"):
        elo_ratings({("a", "random"): (5, 0, 5), ("b", "c"): (5, 0, 5)})
    with pytest.raises(ValueError, match="anchor"):
        elo_ratings({("a", "b"): (5, 0, 5)})
    # A prior keeps a perfect score finite, and the winner ahead.
    ratings = elo_ratings({("solver", "random"): (10, 0, 0)}, prior_draws=1)
    assert ratings["solver"][0] == pytest.approx(400 * math.log10(10.5 / 0.5))
    # Both orders of a pair are combined.
    both = elo_ratings({("a", "random"): (3, 0, 1), ("random", "a"): (1, 0, 3)})
    assert both["a"][0] == pytest.approx(400 * math.log10(3))
