"""`benchmarks._settings.preset_with`, the `--set FIELD=VALUE` of the paired benchmark runs:
each kind of field lands where the preset keeps it, and a setting without `=` is refused."""

import pathlib
import sys

import pytest

import azx


# `pytest` puts tests/ on the path, not the repository root with the benchmarks package.
sys.path.append(str(pathlib.Path(__file__).parents[1]))
from benchmarks._settings import preset_with  # noqa: E402


def test_each_kind_of_field_lands_in_its_place():
    base = azx.presets.get("ppo_breakout")
    preset = preset_with(
        "ppo_breakout",
        ['env="gymnax:Freeway-MinAtar"', "iterations=50", "anneal_iterations=50"],
    )
    assert preset.env == "gymnax:Freeway-MinAtar" and preset.iterations == 50
    assert preset.config.anneal_iterations == 50
    assert preset.config.learning_rate == base.config.learning_rate
    assert preset.network_options == base.network_options
    assert preset.make_env().num_actions == 3  # Freeway: no-op, up, down

    search = preset_with("muzero_breakout", ["search.num_simulations=8", 'network="resnet"'])
    assert search.recipe.search_options == {"num_simulations": 8, "gamma": 0.99}
    assert search.network == "resnet"


def test_a_setting_without_a_value_is_refused():
    with pytest.raises(SystemExit, match="'iterations' must be KEY=VALUE"):
        preset_with("ppo_breakout", ["iterations"])
