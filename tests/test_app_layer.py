"""The application layer's shape: it asks a preset's recipe instead of branching on an
algorithm's name, and its modules talk through public names. Also the one `Preset` type's
JSON form, which run directories written before the recipes must still read."""

import ast
import dataclasses
from pathlib import Path

import jax
import pytest

import azx
from azx._evaluators import EpisodeEvaluator, MatchEvaluator, ReturnEvaluator, evaluator
from azx._recipes import RECIPES


APPLICATION = ["cli.py", "_loop.py", "_rundir.py", "_report.py", "presets.py", "run.py"]
APPLICATION += ["_preset.py", "_recipes.py", "_evaluators.py", "_errors.py", "_cluster.py"]
APPLICATION += ["_play.py"]
ROOT = Path(azx.__file__).parent


def _trees():
    for name in APPLICATION:
        yield name, ast.parse((ROOT / name).read_text())


def test_no_module_imports_another_modules_private_name():
    private = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level >= 1:
                private += [f"{name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert not private


# Games and searches the application treats in their own way (backgammon's points,
# 2048's score, each search's greedy form): chosen by type, never by name.
GAMES_AND_SEARCHES = {"backgammon", "2048", "puct", "gumbel"}


def test_no_algorithm_game_or_search_name_is_compared_in_the_application():
    names = set(RECIPES) | GAMES_AND_SEARCHES
    found = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                strings = {o.value for o in operands if isinstance(o, ast.Constant)}
                found += [f"{name}:{node.lineno}" for _ in strings & names]
    assert not found


def test_the_evaluator_follows_the_agent_and_the_environment():
    # Matches in a two-player game, the agents' episodes in a single-player one, the
    # policy's return for an algorithm without an arena agent.
    chosen = {
        name: type(evaluator(azx.presets.get(name).recipe, azx.presets.get(name).make_env()))
        for name in ("tic_tac_toe", "2048", "muzero_tic_tac_toe", "muzero_cartpole")
    }
    assert chosen == {
        "tic_tac_toe": MatchEvaluator,
        "2048": EpisodeEvaluator,
        "muzero_tic_tac_toe": MatchEvaluator,
        "muzero_cartpole": EpisodeEvaluator,
    }
    ppo = azx.presets.get("ppo_cartpole")
    assert isinstance(evaluator(ppo.recipe, ppo.make_env()), ReturnEvaluator)


def test_a_config_from_before_ppo_reads_as_alphazero():
    preset = azx.presets.get("tic_tac_toe")
    data = preset.to_dict()
    assert data.pop("algorithm") == "alphazero"
    assert azx.presets.from_dict(data) == preset


def test_replace_changes_the_preset_or_its_recipe():
    preset = azx.presets.get("tic_tac_toe").replace(iterations=3, eval_games=20)
    assert preset.iterations == 3 and preset.recipe.eval_games == 20
    assert preset.recipe.search_options == azx.presets.get("tic_tac_toe").recipe.search_options
    with pytest.raises(ValueError, match="eval_games"):
        preset.replace(eval_games=0)
    with pytest.raises(TypeError):
        azx.presets.get("ppo_cartpole").replace(eval_games=20)  # not a PPO setting


def test_a_preset_names_what_does_not_fit_its_recipe():
    preset = azx.presets.get("ppo_cartpole")
    with pytest.raises(ValueError, match="unknown network 'mlp' for ppo"):
        preset.replace(network="mlp")
    with pytest.raises(ValueError, match=r"config must be an azx\.alphazero\.Config for alphazero"):
        dataclasses.replace(azx.presets.get("tic_tac_toe"), config=preset.config)
    data = preset.to_dict() | {"search": "puct"}
    with pytest.raises(ValueError, match=r"unknown preset fields \['search'\]"):
        azx.presets.from_dict(data)


def test_a_muzero_preset_builds_either_network():
    # `network="resnet"` gives the residual model over the board's planes, as
    # azx.muzero.resnet_net builds it; the error for another name lists both.
    preset = azx.presets.get("muzero_tic_tac_toe").replace(
        network="resnet", network_options={"channels": 8, "num_blocks": 1}
    )
    trainer, state = preset.build(seed=0)
    assert isinstance(state.net.representation, azx.muzero.ResNetRepresentation)
    observation = trainer.env.init(jax.random.key(0)).observation
    assert state.net.representation(observation).shape == (8, 3, 3)
    with pytest.raises(
        ValueError, match="unknown network 'conv' for muzero; expected one of 'mlp', 'resnet'"
    ):
        preset.replace(network="conv")
