"""Stochastic MuZero: its learned model's chance nodes, the native searches over it against
mctx's stochastic policy on the same model, and a model made exact (the dice game itself)
against the search over the true chance model and exact expectimax values."""

import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _four_devices import run_script
from _tiers import slow_repeats
from test_muzero import G, K, N, R, V, _window
from test_search_chance import exact_q

import azx
import azx.muzero as mz
from azx.search import ILLEGAL_LOGIT, PUCT, MctxPUCT, PUCTRoot


# `pytest` puts tests/ on the path, not the repository root with the benchmarks package.
sys.path.append(str(pathlib.Path(__file__).parents[1]))
from benchmarks.stochastic_dice import judge_dice_race, race_states  # noqa: E402


BATCH = 8
SIMULATIONS = 24
ACTIONS, CODES = 3, 5


def _net(support_size=None, seed=3):
    return mz.stochastic_mlp_net(
        (5,),
        ACTIONS,
        num_codes=CODES,
        embedding_size=8,
        width=16,
        support_size=support_size,
        key=jax.random.key(seed),
    )


def _observations(seed):
    key_obs, key_mask = jax.random.split(jax.random.key(seed))
    observation = jax.random.normal(key_obs, (BATCH, 5))
    legal = jax.random.bernoulli(key_mask, 0.7, (BATCH, ACTIONS)).at[:, 0].set(True)
    return mz.Observation(observation=observation, legal_action_mask=legal)


@eqx.filter_jit
def _model_steps(model, roots, action, code, keys):
    """The model's root, a decision step from it, a chance step from that (with the
    model and with the networks by hand), all in one compiled call."""
    net = model.net
    state, evaluation = model.root(roots)
    after = model.step(state, action, keys)
    child = model.step(after.state, code, keys)
    afterstate = jax.vmap(net.afterstate)(state.embedding, action)
    sigma, q = jax.vmap(net.predict_afterstate)(afterstate)
    reward, embedding = jax.vmap(net.step)(afterstate, code)
    logits, value = jax.vmap(net.predict)(embedding)
    by_hand = dict(
        afterstate=afterstate,
        sigma=sigma,
        q=q,
        reward=reward,
        embedding=embedding,
        logits=logits,
        value=value,
    )
    return state, evaluation, after, child, by_hand


def test_a_decision_leads_to_a_chance_node_over_the_codes_and_a_code_to_a_decision_node():
    model = mz.StochasticLearnedModel(net=_net(support_size=4), gamma=0.9)
    assert model.width == CODES
    roots = _observations(0)
    keys = jax.random.split(jax.random.key(0), BATCH)
    action = jnp.arange(BATCH, dtype=jnp.int32) % ACTIONS
    code = jnp.arange(BATCH, dtype=jnp.int32) % CODES
    state, evaluation, after, child, by_hand = _model_steps(model, roots, action, code, keys)
    by_hand = {k: np.asarray(v) for k, v in by_hand.items()}
    assert state.embedding.shape == (BATCH, 8)
    assert evaluation.logits.shape == (BATCH, CODES)
    legal = np.asarray(roots.legal_action_mask)
    assert np.all(np.asarray(evaluation.logits)[:, :ACTIONS][~legal] == ILLEGAL_LOGIT)
    assert np.all(np.asarray(evaluation.logits)[:, ACTIONS:] == ILLEGAL_LOGIT)
    # A decision leads to a chance node: the afterstate, valued by Q, its prior sigma.
    assert np.all(np.asarray(after.chance)) and np.all(np.asarray(after.state.is_chance))
    np.testing.assert_array_equal(np.asarray(after.reward), 0.0)
    np.testing.assert_array_equal(np.asarray(after.discount), 1.0)
    np.testing.assert_array_equal(np.asarray(after.state.embedding), by_hand["afterstate"])
    np.testing.assert_array_equal(np.asarray(after.evaluation.logits), by_hand["sigma"])
    np.testing.assert_array_equal(np.asarray(after.evaluation.value), by_hand["q"])
    assert np.all(np.asarray(after.evaluation.legal_action_mask))
    # A code leads to a decision node: the dynamics' reward and embedding, predicted.
    assert not np.any(np.asarray(child.chance)) and not np.any(np.asarray(child.state.is_chance))
    np.testing.assert_array_equal(np.asarray(child.state.embedding), by_hand["embedding"])
    np.testing.assert_array_equal(np.asarray(child.reward), by_hand["reward"])
    np.testing.assert_array_equal(np.asarray(child.discount), np.full(BATCH, 0.9, np.float32))
    np.testing.assert_array_equal(
        np.asarray(child.evaluation.logits)[:, :ACTIONS], by_hand["logits"]
    )
    np.testing.assert_array_equal(np.asarray(child.evaluation.value), by_hand["value"])
    mask = np.asarray(child.evaluation.legal_action_mask)
    assert np.all(mask[:, :ACTIONS]) and not np.any(mask[:, ACTIONS:])
    two = mz.StochasticLearnedModel(net=model.net, gamma=0.9, two_player=True)
    _, _, _, two_child, _ = _model_steps(two, roots, action, code, keys)
    np.testing.assert_array_equal(np.asarray(two_child.discount), np.full(BATCH, -0.9, np.float32))


@eqx.filter_jit
def _search(search, net, roots, key):
    return mz.stochastic_search_observations(search, net, roots, two_player=False, key=key)


# The slow tier repeats the comparison on a second network.
@pytest.mark.parametrize("seed", slow_repeats([0, 1], {1}))
def test_native_puct_over_the_learned_model_agrees_with_mctx_stochastic_policy(seed):
    net = _net(support_size=6, seed=seed)
    root_policy = PUCTRoot(dirichlet_fraction=0.0, temperature=0.0)
    native = PUCT(SIMULATIONS, gamma=0.9, root_policy=root_policy)
    reference = MctxPUCT(SIMULATIONS, gamma=0.9, root_policy=root_policy)
    roots = _observations(seed)
    keys = jax.random.split(jax.random.key(seed), BATCH)
    out = _search(native, net, roots, keys)
    ref = _search(reference, net, roots, keys)
    visits = np.asarray(out.tree.root_child_visits())[:, :ACTIONS]
    np.testing.assert_allclose(visits / SIMULATIONS, np.asarray(ref.policy_target), atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(out.policy_target), np.asarray(ref.policy_target), atol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(out.root_value), np.asarray(ref.root_value), rtol=1e-4, atol=1e-5
    )
    legal = np.asarray(roots.legal_action_mask)
    assert np.all(visits[~legal] == 0)
    assert np.all(legal[np.arange(BATCH), np.asarray(out.action)])


GAME = azx.envs.DiceRace(goal=5, moves=4)
ROLL = jnp.asarray((0, 2, 4))
LOG_ROLL = jnp.log(jnp.asarray((0.5, 0.25, 0.25)))
WALK = jnp.asarray([0.0, ILLEGAL_LOGIT, ILLEGAL_LOGIT])


def _value_table() -> np.ndarray:
    """Expectimax values of the game's positions, 0 where the game is over."""
    table = np.zeros((GAME.goal + 5, GAME.moves + 2), np.float32)
    for position in range(GAME.goal):
        for moves in range(GAME.moves):
            table[position, moves] = max(exact_q(GAME, position, moves, a) for a in (0, 1))
    return table


VALUES = jnp.asarray(_value_table())


def _exact_value(position, moves):
    return VALUES[position.astype(jnp.int32), moves.astype(jnp.int32)]


def _squares_and_moves(observation):
    """The position and the moves taken that the game's thermometer codes count."""
    squares, moves = jnp.split(observation, [GAME.goal])
    return squares.sum(), moves.sum()


# The "learned" networks made the game itself, written from its rules: an embedding is
# (position, moves taken, action into the afterstate); a position past the goal or out
# of moves is absorbing, with reward 0 and value 0.
class _Represent(eqx.Module):
    def __call__(self, observation):
        return jnp.stack([*_squares_and_moves(observation), jnp.float32(0.0)])


class _Predict(eqx.Module):
    def __call__(self, embedding):
        return jnp.zeros(2), _exact_value(embedding[0], embedding[1])[None]


class _Afterstate(eqx.Module):
    def __call__(self, embedding, action):
        return embedding.at[2].set(action.astype(jnp.float32))


class _Dynamics(eqx.Module):
    def __call__(self, afterstate, code):
        position, moves, action = afterstate
        done = (position >= GAME.goal) | (moves >= GAME.moves)
        advance = jnp.where(action == 1, ROLL[jnp.argmax(code)], 1).astype(jnp.float32)
        new_position = jnp.where(done, position, position + advance)
        new_moves = jnp.where(done, moves, moves + 1)
        reward = jnp.where(~done & (new_position >= GAME.goal), 1.0, 0.0)
        return reward[None], jnp.stack([new_position, new_moves, jnp.float32(0.0)])


class _PredictAfterstate(eqx.Module):
    def __call__(self, afterstate):
        logits = jnp.where(afterstate[2] == 1, LOG_ROLL, WALK)

        def outcome(code):
            reward, child = _Dynamics()(afterstate, jax.nn.one_hot(code, 3))
            return reward[0] + _exact_value(child[0], child[1])

        q = jnp.sum(jax.nn.softmax(logits) * jax.vmap(outcome)(jnp.arange(3)))
        return logits, q[None]


def _exact_net():
    return mz.StochasticMuZeroNet(
        representation=_Represent(),
        prediction=_Predict(),
        afterstate_dynamics=_Afterstate(),
        afterstate_prediction=_PredictAfterstate(),
        dynamics=_Dynamics(),
        encoder=_Afterstate(),  # unused by the search
        num_actions=2,
        num_codes=3,
        support_size=None,
    )


def _exact_policy_value_net(observation):
    return jnp.zeros(2), _exact_value(*_squares_and_moves(observation))


def _positions():
    """Every position of the game that is not over, and where the choice matters (the
    moves' expectimax Q at least 0.05 apart), with the best move and the margin."""
    rows = []
    for position in range(GAME.goal):
        for moves in range(GAME.moves):
            q = [exact_q(GAME, position, moves, a) for a in (0, 1)]
            if abs(q[0] - q[1]) >= 0.05:
                rows.append((position, moves, int(np.argmax(q)), abs(q[0] - q[1])))
    position, moves, best, margin = (np.asarray(x) for x in zip(*rows, strict=True))
    return race_states(GAME, position, moves), best, margin


@eqx.filter_jit
def _exact_searches(search, states, key):
    learned = mz.stochastic_search_states(search, _exact_net(), GAME, states, key=key)
    rows = jax.tree.leaves(states)[0].shape[0]
    true = search(_exact_policy_value_net, GAME, search.init(GAME, rows), states, key=key)
    return learned.action, true.action


SEARCHES = {
    "gumbel": azx.search.Gumbel(
        64, max_depth=2, root_policy=azx.search.SequentialHalving(gumbel_scale=0.0)
    ),
    "puct": PUCT(128, max_depth=2, root_policy=PUCTRoot(dirichlet_fraction=0.0, temperature=0.0)),
    "mctx_puct": MctxPUCT(
        128, max_depth=2, root_policy=PUCTRoot(dirichlet_fraction=0.0, temperature=0.0)
    ),
}


# Two moves deep (a move, its chance outcomes, each valued by the exact value), the search
# takes the expectimax step; deeper, its mean backups mix in its own exploratory moves.
# The slow tier repeats the check with PUCT, natively and by mctx.
@pytest.mark.parametrize("name", slow_repeats(sorted(SEARCHES), {"puct", "mctx_puct"}))
def test_a_learned_model_made_the_dice_game_decides_as_the_search_over_the_true_model(name):
    states, best, margin = _positions()
    assert len(best) >= 4 and 0 < best.sum() < len(best)  # both moves are best somewhere
    keys = jax.random.split(jax.random.key(0), len(best))
    learned, true = _exact_searches(SEARCHES[name], states, keys)
    learned, true = np.asarray(learned), np.asarray(true)
    if name == "gumbel":
        # Sequential halving compares the moves' Q: both searches play the best move.
        np.testing.assert_array_equal(learned, true)
        np.testing.assert_array_equal(learned, best)
    else:
        # PUCT plays its most visited move, which in 128 simulations separates only the
        # moves whose Q lie 0.1 apart or more (the search over the true model, whose chance
        # nodes start from a sampled outcome, misses one of 0.125).
        clear = margin >= 0.1
        np.testing.assert_array_equal(learned[clear], best[clear])


def test_the_straight_through_code_is_one_hot_with_the_softmax_gradient():
    logits = jnp.asarray([0.3, 1.2, -0.5])
    code = mz.straight_through_code(logits)
    np.testing.assert_array_equal(np.asarray(code), [0.0, 1.0, 0.0])
    weights = jnp.asarray([1.0, 2.0, 3.0])
    grad = jax.grad(lambda x: jnp.dot(mz.straight_through_code(x), weights))(logits)
    expected = jax.grad(lambda x: jnp.dot(jax.nn.softmax(x), weights))(logits)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(expected), rtol=1e-6)


@pytest.mark.slow  # an option of the loss, as MuZero's consistency test (about 17 s)
def test_the_consistency_loss_reaches_the_encoder_through_the_code():
    # Observations of size 1 (test_muzero's window: observation t is t), 2 actions, 3 codes.
    net = mz.stochastic_mlp_net((1,), 2, num_codes=3, embedding_size=4, width=8,
                                key=jax.random.key(0))  # fmt: skip
    head = mz.ConsistencyHead((4,), hidden_size=8, projection_size=3, key=jax.random.key(1))
    net = eqx.tree_at(lambda n: n.consistency, net, head, is_leaf=lambda x: x is None)
    window = _window(R, G, V, terminated=[1])  # step 2's observation is the next episode's
    targets = mz.unroll_targets(window, K, N, absorbing_end=True)
    weight = 2.0

    def consistency_of(net):
        parts = mz.stochastic_segment_loss(
            net, window.observation[0], targets, consistency_loss_weight=weight
        )
        return parts[6]

    # By hand: afterstate of action k, the encoder's straight-through code of the move from
    # observation k to k + 1, the dynamics' embedding against observation k + 1's projection.
    real = [np.asarray(net.consistency.project(net.represent(window.observation[k])))
            for k in (1, 2)]  # fmt: skip
    in_episode = [1.0, 0.0]

    def by_hand(net):
        embedding, total = net.represent(window.observation[0]), 0.0
        for k in range(K):
            afterstate = net.afterstate(embedding, jnp.int32(k % 2))
            code = mz.straight_through_code(
                net.encode(window.observation[k], window.observation[k + 1])
            )
            _, embedding = net.dynamics(afterstate, code)
            embedding = mz.scale_gradient(embedding, 0.5)
            online = net.consistency.predict(net.consistency.project(embedding))
            cosine = jnp.dot(online, real[k]) / (jnp.linalg.norm(online) * np.linalg.norm(real[k]))
            total += in_episode[k] * (1.0 - cosine) / K
        return weight * total

    np.testing.assert_allclose(float(consistency_of(net)), float(by_hand(net)), rtol=1e-5)
    grads = eqx.filter_grad(consistency_of)(net)
    expected = eqx.filter_grad(by_hand)(net)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-7)
    # The code carries the loss's gradient into the encoder.
    assert any(np.any(np.asarray(g)) for g in jax.tree.leaves(grads.encoder))
    # Weight 0: the other parts as without the head, and no consistency part.
    plain = eqx.tree_at(lambda n: n.consistency, net, None)
    with_head = mz.stochastic_segment_loss(net, window.observation[0], targets)
    without = mz.stochastic_segment_loss(plain, window.observation[0], targets)
    for a, b in zip(with_head, without, strict=True):
        assert float(a) == float(b)
    assert float(with_head[6]) == 0.0
    with pytest.raises(ValueError, match="needs a network with a consistency head"):
        mz.stochastic_segment_loss(
            plain, window.observation[0], targets, consistency_loss_weight=1.0
        )


# About 35 s of compiling on a 2-core CPU: the slow tier's.
@pytest.mark.slow
def test_training_on_the_dice_game_runs_and_learns_every_part():
    config = mz.Config(
        num_envs=4,
        collect_steps=8,
        train_steps=2,
        batch_size=16,
        buffer_capacity=4 * 32,
        unroll_steps=3,
        td_steps=4,
    )
    trainer = mz.StochasticMuZero(GAME, azx.search.Gumbel(8), config)
    net = mz.stochastic_mlp_net(
        GAME.observation_shape,
        2,
        num_codes=4,
        embedding_size=8,
        width=16,
        key=jax.random.key(0),
    )
    state = trainer.init(net, key=jax.random.key(1))
    state = eqx.filter_jit(trainer.train)(state, 2)
    metrics = state.metrics
    assert int(state.iteration) == 2 and int(metrics.updates_applied) == 2
    for name in ("loss", "policy_loss", "value_loss", "q_loss", "chance_loss", "commitment_loss"):
        value = float(getattr(metrics, name))
        assert np.isfinite(value) and value > 0, name
    # Every network moved, the encoder through the straight-through codes.
    before, after = eqx.filter(net, eqx.is_array), eqx.filter(state.net, eqx.is_array)
    for part in (
        "representation",
        "prediction",
        "afterstate_dynamics",
        "afterstate_prediction",
        "dynamics",
        "encoder",
    ):
        moved = jax.tree.map(
            lambda a, b: bool(jnp.any(a != b)), getattr(before, part), getattr(after, part)
        )
        assert any(jax.tree.leaves(moved)), part
    with pytest.raises(ValueError, match="reanalyse_steps"):
        mz.StochasticMuZero(GAME, azx.search.Gumbel(8), mz.Config(reanalyse_steps=1))


def test_the_dice_game_solution_is_the_reference_solvers():
    # azx.envs.dice_race_q against test_search_chance's recursion, written from the rules.
    q = azx.envs.dice_race_q(GAME)
    for position in range(5):
        for moves in range(4):
            for action in (0, 1):
                assert q[position, moves, action] == pytest.approx(
                    exact_q(GAME, position, moves, action)
                )


@pytest.mark.slow
def test_the_dice_game_passes_check_env():
    azx.envs.check_env(azx.envs.DiceRace())


# Two iterations of each seed, and the runs' checkpoints and episodes, cost about a minute
# of compiling on a 2-core CPU: the slow tier's.
@pytest.mark.slow
def test_the_dice_preset_trains_by_seeds_checkpoints_and_evaluates(tmp_path):
    from _cli import azx_cli

    small = {"iterations": 2, "eval_every": 2, "log_every": 1, "quiet": True}
    preset = "stochastic_muzero_dice"
    azx.run.train(tmp_path / "both", preset=preset, seeds=2, eval_games=8, **small)
    azx.run.train(tmp_path / "one", preset=preset, seed=1, eval_games=8, **small)
    wall = ("elapsed_s", "steps_per_s")
    together, alone = (
        [{k: v for k, v in r.items() if k not in wall} for r in azx.run.read_metrics(path)]
        for path in (tmp_path / "both" / "seed1", tmp_path / "one")
    )
    assert together == alone and len(alone) == 3
    assert np.isfinite(alone[-1]["chance_loss"]) and np.isfinite(alone[-1]["q_loss"])
    run = azx.load_run(tmp_path / "one")
    assert isinstance(run.trainer, mz.StochasticMuZero) and int(run.state.iteration) == 2
    direct = mz.stochastic_evaluate(
        run.trainer, run.state.net, num_episodes=4, key=jax.random.key(5)
    )
    played = run.play_episodes(4, key=jax.random.key(5))
    np.testing.assert_array_equal(np.asarray(played.returns), np.asarray(direct.returns))
    result = azx_cli("eval", "--run", tmp_path / "one", "--games", 4)
    assert result.exit_code == 0, result.output


# Trains the preset for its 300 iterations, seed 0: minutes on a 2-core CPU.
@pytest.mark.slow
def test_the_dice_preset_searches_for_best_moves(tmp_path):
    azx.run.train(tmp_path / "run", preset="stochastic_muzero_dice", quiet=True, eval_every=300)
    run = azx.load_run(tmp_path / "run")
    search = run.preset.recipe.make_eval_search()
    optimal, always_roll, _ = judge_dice_race(run.env, run.state.net, search)
    print(f"a best move in {optimal:.3f} of the positions (always rolling: {always_roll:.3f})")
    # Better than always rolling (27 of the 31 positions): 28 here. The search over the
    # true model plays a best move in 95% of them; the learned model's does in some runs
    # (31 of 31 for seed 0 trained by `azx train`) and not in others, so that is not
    # asserted.
    assert optimal > always_roll


@pytest.mark.slow
def test_four_devices_train_like_one():
    assert "STOCHASTIC MUZERO SHARDED OK" in run_script("_muzero_sharded_run.py", "stochastic")
