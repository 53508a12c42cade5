"""AlphaZero on a single-player game (2048): `azx train`'s evaluation plays episodes, not
matches, and reports each agent's mean return with a 95% interval; the curve, the
headline numbers and `azx eval` follow."""

import dataclasses

import jax
import numpy as np
import pytest
from scipy import stats

import azx
from azx._evaluators import evaluator


@pytest.fixture(scope="module")
def small():
    preset = azx.presets.get("2048")
    config = dataclasses.replace(
        preset.config, num_envs=4, collect_steps=2, train_steps=1, batch_size=8
    )
    options = preset.recipe.search_options | {"num_simulations": 4}
    preset = preset.replace(config=config, search_options=options, eval_games=6)
    trainer, state = preset.build(seed=0)
    return preset, trainer, state


def test_evaluation_plays_episodes_with_an_interval(small, tmp_path):
    preset, trainer, state = small
    recipe = preset.recipe
    key = jax.random.key(3)
    judge = evaluator(recipe, trainer.env)
    results = judge.evaluate(trainer, state, key=key, phase=lambda text: None)
    assert list(results) == ["search"]
    record = results["search"]
    # The same episodes, played by the arena directly: the record summarises them.
    agent = recipe.agent(state.net, "search", None, trainer.env)
    returns, finished = jax.jit(
        lambda: azx.arena.episode_returns(trainer.env, agent, num_games=6, key=key)
    )()
    returns = np.asarray(returns, np.float64)
    assert record["episodes"] == 6 and record["unfinished"] == int(np.sum(~finished))
    assert record["return_mean"] == pytest.approx(returns.mean())
    half = stats.t.ppf(0.975, 5) * returns.std(ddof=1) / np.sqrt(6)
    assert record["return_low"] == pytest.approx(returns.mean() - half)
    assert record["return_high"] == pytest.approx(returns.mean() + half)
    assert record["return_min"] == pytest.approx(returns.min())
    # A 2048 game scores the merged tiles (here scaled by 0.01): every game merges some.
    assert returns.min() > 0
    (line,) = judge.evaluation_lines(results)
    assert line.startswith("search: return ") and "over 6 episodes" in line
    assert judge.headline(results) == {"search return": record["return_mean"]}
    records = [
        {"iteration": 0, "env_steps": 0, "eval": results},
        {"iteration": 1, "env_steps": 8, "loss": 1.0, "policy_loss": 0.5, "value_loss": 0.5},
    ]
    judge.plot(records, tmp_path / "curve.png", title="2048")
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
