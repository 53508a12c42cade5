"""Chance nodes in the native search, against exact expectimax values of a small dice game
and against searching the same game by sampling one outcome per expansion."""

import dataclasses
import functools
import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _tiers import slow_repeats

import azx
from azx.envs import AbstractChanceEnv


# `pytest` puts tests/ on the path, not the repository root with the benchmarks package.
sys.path.append(str(pathlib.Path(__file__).parents[1]))
from benchmarks.stochastic_dice import race_states  # noqa: E402


# The dice race's rules written again: the exact values below are the searches' reference
# and azx.envs.dice_race_q's (test_stochastic_muzero checks it against `exact_q`), so they
# are computed apart from the library's solver.
ROLL = (0, 2, 4)
ROLL_PROBABILITIES = (0.5, 0.25, 0.25)


def expectimax_q(game, position: int, moves: int, action: int, value) -> float:
    """A move's expected return from a race position not yet over: over the move's
    outcomes, 1 where it reaches the goal, else `value(position, moves)` of the position
    it reaches (0 where that has no moves left)."""
    outcomes = [(1, 1.0)] if action == 0 else zip(ROLL, ROLL_PROBABILITIES, strict=True)
    total = 0.0
    for advance, probability in outcomes:
        after = position + advance
        if after >= game.goal:
            total += probability
        elif moves + 1 < game.moves:
            total += probability * value(after, moves + 1)
    return total


@functools.cache
def exact_value(game, position: int, moves: int) -> float:
    """The race's expectimax value from a position not yet over."""
    return max(exact_q(game, position, moves, action) for action in (0, 1))


def exact_q(game, position: int, moves: int, action: int) -> float:
    """A move's expectimax Q: its expected return with best play after it."""
    return expectimax_q(game, position, moves, action, functools.partial(exact_value, game))


def uniform_net(observation):
    """No knowledge: uniform prior, value 0, so that the search finds the values itself."""
    del observation
    return jnp.zeros(2), jnp.zeros(())


BATCH = 8
SEARCHES = {
    "puct": azx.search.PUCT(1, root_policy=azx.search.PUCTRoot(dirichlet_fraction=0.0)),
    "gumbel": azx.search.Gumbel(1, root_policy=azx.search.SequentialHalving(gumbel_scale=0.0)),
    # mctx.stochastic_muzero_policy; mctx has no Gumbel variant of it.
    "mctx-puct": azx.search.MctxPUCT(1, root_policy=azx.search.PUCTRoot(dirichlet_fraction=0.0)),
}


def _root_q(game, search, num_simulations, chance_nodes):
    """Each root action's Q and visits after a search of the game's start, one row per
    seed, and the root values."""
    states = jax.vmap(game.init)(jax.random.split(jax.random.key(0), BATCH))
    if isinstance(search, azx.search.AbstractMctxSearch):
        search = dataclasses.replace(
            search, num_simulations=num_simulations, chance_nodes=chance_nodes
        )
        model = search.environment_model(uniform_net, game)
        output = eqx.filter_jit(search.policy_output)(model, states, jax.random.key(1))
        tree = output.search_tree
        q = tree.qvalues(jnp.zeros(BATCH, jnp.int32))
        visits = tree.children_visits[:, 0]
        return np.asarray(q), np.asarray(visits), np.asarray(tree.summary().value)
    search = dataclasses.replace(
        search,
        num_simulations=num_simulations,
        capacity=num_simulations + 1,
        chance_nodes=chance_nodes,
    )
    tree = search.init(game, BATCH)
    keys = jax.random.split(jax.random.key(1), BATCH)
    output = eqx.filter_jit(search)(uniform_net, game, tree, states, key=keys)
    q, visits = output.tree.edge_q[:, 0, :2], output.tree.edge_visits[:, 0, :2]
    return np.asarray(q), np.asarray(visits), np.asarray(output.root_value)


# The slow tier repeats the check with mctx (test_mctx_plans_over_pgx_chance has mctx
# plan over chance in the default run).
@pytest.mark.parametrize("name", slow_repeats(sorted(SEARCHES), {"mctx-puct"}))
def test_a_chance_node_takes_the_expected_value_of_its_outcomes(name):
    """One move to square 2: walking pays 0, rolling pays 1 with probability 1/2 (a 2 or a
    4). With chance nodes the roll's Q is its expected value, to the rounding of visits
    that follow the probabilities (within two visits' share); sampling one outcome
    per expansion gives the first sample's reward, 0 or 1, in every row."""
    game = azx.envs.DiceRace(goal=2, moves=1)
    assert (exact_q(game, 0, 0, 0), exact_q(game, 0, 0, 1)) == (0.0, 0.5)
    q, visits, _ = _root_q(game, SEARCHES[name], 64, chance_nodes=True)
    np.testing.assert_allclose(q[:, 0], 0.0)
    # The chance node's mean holds its own first estimate (one sampled outcome) and one
    # return per visit below it, whose outcomes follow the probabilities to within one.
    assert np.all(np.abs(q[:, 1] - 0.5) <= 2 / visits[:, 1])
    sampled, _, _ = _root_q(game, SEARCHES[name], 64, chance_nodes=False)
    assert set(np.unique(sampled[:, 1])) <= {0.0, 1.0}


def linear_value(position, moves):
    return 0.1 * position + 0.01 * moves


def linear_net(game: azx.envs.DiceRace):
    """A network for `game` that knows something: uniform prior, value `linear_value` of
    the squares and moves that its observation's thermometer codes count."""

    def net(observation):
        squares, moves = jnp.split(observation, [game.goal])
        return jnp.zeros(2), linear_value(squares.sum(), moves.sum())

    return net


@pytest.mark.parametrize("name", ["puct", "gumbel"])
def test_a_new_chance_node_is_valued_by_the_expectation_over_its_outcomes(name):
    """With `chance_expectation`, a chance node's own value (the tree's `raw_value`, its
    first backup) is the probability-weighted mean over every outcome of the reward and
    the network's value after it, as one step of expectimax computed by hand gives; by
    default it is one sampled outcome's, which differs from it somewhere."""
    game = azx.envs.DiceRace(goal=5, moves=4)
    positions, moves = [0, 1, 2, 3, 4, 3, 2, 0], [0, 1, 2, 3, 0, 3, 1, 2]
    states = race_states(game, positions, moves)

    def chance_values(chance_expectation):
        search = dataclasses.replace(
            SEARCHES[name],
            num_simulations=8,
            capacity=9,
            chance_expectation=chance_expectation,
        )
        output = eqx.filter_jit(search)(
            linear_net(game), game, search.init(game, BATCH), states, key=jax.random.key(1)
        )
        tree = output.tree
        values, expected = [], []
        for row in range(BATCH):
            for action in (0, 1):
                node = int(tree.children[row, 0, action])
                if node >= 0:
                    assert bool(tree.chance[row, node])
                    values.append(float(tree.raw_value[row, node]))
                    expected.append(
                        expectimax_q(game, positions[row], moves[row], action, linear_value)
                    )
        return np.asarray(values), np.asarray(expected)

    values, expected = chance_values(True)
    assert len(values) >= BATCH + 2  # both moves' chance nodes in most rows
    np.testing.assert_allclose(values, expected, rtol=1e-6, atol=1e-7)
    values, expected = chance_values(False)
    assert np.abs(values - expected).max() > 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_chance_nodes_converge_to_the_expectimax_values(name):
    """Four moves to square 5 (exact values 0.75 for walking first, 0.78125 for rolling):
    the Q of the most visited root action, against its expectimax Q. With chance nodes the
    error shrinks as the simulations grow, below 0.15 at 4000; sampling one outcome per
    expansion stays above 0.2 (the search keeps lucky rolls as the moves' consequences)."""
    game = azx.envs.DiceRace(goal=5, moves=4)
    exact = np.asarray([exact_q(game, 0, 0, 0), exact_q(game, 0, 0, 1)])
    assert exact.tolist() == [0.75, 0.78125]
    rows = np.arange(BATCH)

    def error(num_simulations, chance_nodes):
        q, visits, root_value = _root_q(game, SEARCHES[name], num_simulations, chance_nodes)
        best = visits.argmax(axis=1)
        value_error = np.abs(root_value - exact_value(game, 0, 0)).max()
        return float(np.abs(q[rows, best] - exact[best]).max()), float(value_error)

    (few, few_value), (many, many_value) = error(400, True), error(4000, True)
    sampled, sampled_value = error(4000, False)
    print(
        f"{name}: chance nodes {few:.3f} at 400, {many:.3f} at 4000 (root value "
        f"{few_value:.3f}, {many_value:.3f}); sampled {sampled:.3f} (root value "
        f"{sampled_value:.3f})"
    )
    assert many < few and many < 0.15
    assert sampled > 0.2
    # The root value, the mean of every return backed up through the root (the early ones
    # from the uniform network's zeros, and exploration's), moves towards the exact value
    # more slowly.
    assert many_value < few_value


REUSE_SIMULATIONS = 48


def _subtree_reference(old, new_root):
    """The slots under `new_root` in one row of a tree (NumPy arrays), in slot order, found
    by walking the children: what compaction must keep, in the order it must keep them."""
    if new_root < 0:
        return []
    kept, stack = [], [new_root]
    while stack:
        node = stack.pop()
        kept.append(node)
        stack.extend(int(c) for c in old["children"][node] if c >= 0)
    return sorted(kept)


def _check_backups(tree, row):
    """What every backup must leave in a tree with room to spare: at a node that is not
    terminal, one visit for its own evaluation plus its edges' visits, and a mean value
    that is the mean of its own value and its edges' returns."""
    n = int(tree.num_nodes[row])
    visits = np.asarray(tree.node_stats[row, :n, 1])
    value = np.asarray(tree.node_stats[row, :n, 0])
    raw = np.asarray(tree.node_stats[row, :n, 2])
    edge_visits = np.asarray(tree.edge_visits[row, :n])
    edge_q = np.asarray(tree.edge_q[row, :n])
    moving = ~np.asarray(tree.terminal[row, :n])
    np.testing.assert_array_equal(visits[moving], 1 + edge_visits[moving].sum(axis=1))
    total = raw + (edge_visits * edge_q).sum(axis=1)
    np.testing.assert_allclose((value * visits)[moving], total[moving], rtol=1e-5, atol=1e-5)


# Tree reuse is an option: the slow tier checks it through chance nodes, with each search
# (the default run checks that advancing needs the outcome, below).
@pytest.mark.slow
@pytest.mark.parametrize("name", ["puct", "gumbel"])
def test_tree_reuse_follows_the_outcome_that_happened(name):
    """After the real move and the real roll, `advance` keeps the subtree under the chance
    node's child for that roll: the same nodes, in slot order, with the same statistics,
    prior, flags and states, and its root holds the state the game reached. The next
    search from that state continues from those statistics: its root gains exactly one
    visit per simulation, and every node's visits and mean value stay the sums of its
    edges' (checked against a fresh tree's search too)."""
    game = azx.envs.DiceRace(goal=5, moves=4)
    search = dataclasses.replace(
        SEARCHES[name], num_simulations=REUSE_SIMULATIONS, reuse_tree=True, capacity=None
    )
    states = jax.vmap(game.init)(jax.random.split(jax.random.key(0), BATCH))
    keys = jax.random.split(jax.random.key(1), (3, BATCH))
    run = eqx.filter_jit(search)
    output = run(uniform_net, game, search.init(game, BATCH), states, key=keys[0])
    after = jax.vmap(game.afterstate)(states, output.action)
    outcome = jax.vmap(game.sample_outcome)(after, keys[1])
    next_states = jax.vmap(game.apply_outcome)(after, outcome)
    done = jax.vmap(game.terminated)(next_states)
    kept = search.advance(output.tree, output.action, done, outcome=outcome)

    old_tree, reused = output.tree, 0
    for row in range(BATCH):
        old = jax.tree.map(lambda x: np.asarray(x[row]), old_tree)
        chance_node = old.children[0, int(output.action[row])]
        assert chance_node < 0 or old.chance[chance_node]  # a move leads to a chance node
        new_root = -1 if chance_node < 0 else int(old.children[chance_node, int(outcome[row])])
        slots = [] if bool(done[row]) else _subtree_reference(vars(old), new_root)
        assert int(kept.num_nodes[row]) == len(slots)
        reused += bool(slots)
        if not slots:
            continue
        index = np.full(old_tree.capacity, -1)
        index[slots] = np.arange(len(slots))
        new = jax.tree.map(lambda x: np.asarray(x[row, : len(slots)] if x.ndim > 1 else x), kept)
        for field in ("node_stats", "edge_visits", "edge_q", "selection_prior", "chance"):
            np.testing.assert_array_equal(getattr(new, field), getattr(old, field)[slots])
        children = old.children[slots]
        np.testing.assert_array_equal(new.children, np.where(children >= 0, index[children], -1))
        np.testing.assert_array_equal(new.parent[1:], index[old.parent[slots][1:]])
        assert new.parent[0] == azx.search.NO_PARENT and not new.chance[0]
        for ours, theirs in zip(
            jax.tree.leaves(kept.state.state), jax.tree.leaves(next_states), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(ours[row, 0]), np.asarray(theirs[row]))
    assert reused >= BATCH // 2  # the test looks at reused subtrees, not only resets

    old_root_visits = np.asarray(kept.node_stats[:, 0, 1])
    following = run(uniform_net, game, kept, next_states, key=keys[2])
    fresh = run(uniform_net, game, search.init(game, BATCH), next_states, key=keys[2])
    for row in range(BATCH):
        if bool(done[row]):
            continue
        root_visits = int(following.tree.node_stats[row, 0, 1])
        assert root_visits == max(old_root_visits[row], 1) + REUSE_SIMULATIONS
        _check_backups(following.tree, row)
        _check_backups(fresh.tree, row)


def test_tree_reuse_with_chance_nodes_needs_the_outcome():
    game = azx.envs.DiceRace(goal=5, moves=4)
    search = azx.search.PUCT(8, reuse_tree=True)
    states = jax.vmap(game.init)(jax.random.split(jax.random.key(0), 2))
    run = eqx.filter_jit(search)
    output = run(uniform_net, game, search.init(game, 2), states, key=jax.random.key(1))
    done = jnp.zeros(2, bool)
    with pytest.raises(ValueError, match=r"advance needs the chance outcome"):
        search.advance(output.tree, output.action, done)
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\), got 3"):
        search.advance(output.tree, output.action, done, outcome=jnp.asarray([0, 3]))
    # A traced outcome out of range raises nothing (no host callback, so the program stays
    # cacheable): that row's tree is emptied, the others kept as for known outcomes.
    kept = eqx.filter_jit(search.advance)(output.tree, output.action, done, jnp.asarray([-1, 0]))
    known = search.advance(output.tree, output.action, done, outcome=jnp.asarray([0, 0]))
    assert int(kept.num_nodes[0]) == 0
    for leaf, known_leaf in zip(jax.tree.leaves(kept), jax.tree.leaves(known), strict=True):
        np.testing.assert_array_equal(leaf[1], known_leaf[1])
    # Without reuse, or when outcomes are sampled (no chance nodes), advance needs none.
    for other in (
        dataclasses.replace(search, reuse_tree=False),
        dataclasses.replace(search, chance_nodes=False),
    ):
        tree = other.init(game, 2)
        assert other.advance(tree, output.action, done) is not None


def test_the_chance_model_refuses_a_game_without_chance():
    tic_tac_toe = azx.envs.make("tic_tac_toe")
    with pytest.raises(ValueError, match="'tic_tac_toe' does not expose chance"):
        azx.search.ChanceModel(env=tic_tac_toe, net=uniform_net, gamma=1.0)


def test_mctx_gumbel_refuses_to_plan_over_chance():
    """mctx's stochastic policy is PUCT's only: MctxGumbel says so rather than sampling
    outcomes under a flag that asks for chance nodes; with `chance_nodes=False` it samples."""
    game = azx.envs.DiceRace(goal=2, moves=1)
    states = jax.vmap(game.init)(jax.random.split(jax.random.key(0), 2))
    search = azx.search.make("gumbel", 8, backend="mctx")
    with pytest.raises(ValueError, match="no Gumbel variant of its stochastic policy"):
        search.init(game, 2)
    with pytest.raises(ValueError, match="no Gumbel variant of its stochastic policy"):
        search(uniform_net, game, azx.search.MctxTree(), states, key=jax.random.key(1))
    sampled = azx.search.make("gumbel", 8, backend="mctx", chance_nodes=False)
    run = eqx.filter_jit(sampled)
    output = run(uniform_net, game, sampled.init(game, 2), states, key=jax.random.key(1))
    np.testing.assert_allclose(np.asarray(output.policy_target).sum(axis=1), 1.0, rtol=1e-6)


def test_mctx_puct_searches_a_game_without_chance_as_before():
    """`chance_nodes` changes nothing in a game that does not expose its chance: the same
    mctx.muzero_policy call, bit for bit, whatever the flag."""
    env = azx.envs.make("tic_tac_toe")
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 4))

    def net(observation):
        del observation
        return jnp.linspace(0.0, 1.0, 9), jnp.zeros(())

    outputs = [
        azx.search.MctxPUCT(16, chance_nodes=flag)(
            net, env, azx.search.MctxTree(), states, key=jax.random.key(2)
        )
        for flag in (True, False)
    ]
    for a, b in zip(jax.tree.leaves(outputs[0]), jax.tree.leaves(outputs[1]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", ["puct", "mctx-puct"])
def test_a_wrapped_chance_game_is_searched_with_chance_nodes(name):
    """ScaleRewards passes the chance through: searching the dice race with rewards doubled
    plans over the same outcomes and gives exactly twice each root Q (the uniform
    network's values are 0, and doubling is exact in floating point)."""
    game = azx.envs.DiceRace(goal=2, moves=1)
    doubled = azx.envs.ScaleRewards(game, 2.0)
    assert isinstance(doubled, AbstractChanceEnv)
    q, visits, value = _root_q(game, SEARCHES[name], 64, chance_nodes=True)
    q2, visits2, value2 = _root_q(doubled, SEARCHES[name], 64, chance_nodes=True)
    np.testing.assert_array_equal(visits2, visits)
    np.testing.assert_array_equal(q2, 2 * q)
    np.testing.assert_array_equal(value2, 2 * value)


@pytest.mark.slow  # (mctx over a small chance game stays in the default run)
@pytest.mark.parametrize("name", ["2048", "backgammon"])
def test_mctx_plans_over_pgx_chance(name):
    """pgx's games through mctx's stochastic search, with fewer actions than outcomes
    (2048: 4 and 32) and more (backgammon: 156 and 21): one key per row (mctx run row by
    row), each row's result that of its own batch-1 search, and policy targets that are
    distributions over the legal actions."""
    env = azx.envs.make(name)

    def net(observation):
        del observation
        return jnp.zeros(env.num_actions), jnp.zeros(())

    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 2))
    keys = jax.random.split(jax.random.key(1), 2)
    search = azx.search.MctxPUCT(8)
    run = eqx.filter_jit(search)
    output = run(net, env, search.init(env, 2), states, key=keys)
    alone = run(net, env, search.init(env, 1), jax.tree.map(lambda x: x[1:], states), key=keys[1:])
    for ours, theirs in zip(jax.tree.leaves(output), jax.tree.leaves(alone), strict=True):
        np.testing.assert_array_equal(np.asarray(ours[1:]), np.asarray(theirs))
    legal = np.asarray(jax.vmap(env.legal_action_mask)(states))
    target = np.asarray(output.policy_target)
    np.testing.assert_allclose(target.sum(axis=1), 1.0, rtol=1e-6)
    assert np.all(target[~legal] == 0)
    assert np.all(legal[np.arange(2), np.asarray(output.action)])


@pytest.mark.slow  # (the search's own reuse along outcomes stays in the default run)
def test_alphazero_reuses_trees_along_the_outcome_that_happened():
    # Self-play on 2048 with tree reuse and chance nodes: the game steps through its
    # afterstate and a drawn outcome, and each next search starts from the subtree of the
    # move and the tile that happened (visits carried over where the search reached it).
    env = azx.envs.make("2048")
    search = azx.search.PUCT(8, reuse_tree=True)
    config = azx.alphazero.Config(
        num_envs=4, collect_steps=3, train_steps=1, batch_size=4, buffer_capacity=64
    )
    trainer = azx.alphazero.AlphaZero(env, search, config)
    net = azx.nets.MLP(env.observation_shape, env.num_actions, width=16, key=jax.random.key(0))
    state = trainer.init(net, key=jax.random.key(1))
    state = eqx.filter_jit(trainer.step)(state, jax.random.key(2))
    assert state.tree.chance is not None
    root_visits = np.asarray(state.tree.stats.visits)[:, 0]
    # Eight simulations spread over four moves and their tiles (a root counts its own
    # evaluation too): some rows keep a subtree, each smaller than a whole search's.
    assert np.any(root_visits > 0) and np.all(root_visits < 9)
