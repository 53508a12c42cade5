"""`azx.envs.check_env` against environments that keep the interface's promises, and
against deliberately broken ones: one broken promise each, each named by its own error."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _games import SubtractionGame

import azx


_CALLS = []  # the "python state" flaw's calls


class Broken(azx.envs.AbstractEnv):
    """The subtraction game (take 1-3 stones, the last to take wins) with one flaw."""

    name = "subtraction"

    flaw: str = eqx.field(static=True)
    game: SubtractionGame
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, flaw: str):
        self.flaw = flaw
        self.game = SubtractionGame(start_pile=10)
        self.num_actions = 0 if flaw == "no actions" else self.game.num_actions
        self.num_players = self.game.num_players
        shape = self.game.observation_shape
        self.observation_shape = list(shape) if flaw == "shape as a list" else shape
        self.observation_dtype = (
            "float32" if flaw == "dtype as a string" else jnp.dtype(jnp.float32)
        )

    def init(self, key):
        state = self.game.init(key)
        if self.flaw == "starts over":
            state = eqx.tree_at(lambda s: s.terminated, state, jnp.bool_(True))
        if self.flaw == "init keeps python state":
            _CALLS.append(None)
            state = eqx.tree_at(lambda s: s.pile, state, state.pile - len(_CALLS) % 2)
        if self.flaw == "starts with a reward":
            state = eqx.tree_at(lambda s: s.rewards, state, jnp.array([1.0, -1.0]))
        return state

    def step(self, state, action, key):
        if self.flaw == "python branch":
            if state.pile > 0:  # a Python `if` on an array: cannot be traced
                action = action + 0
        after = self.game.step(state, action, key)
        if self.flaw == "pile becomes float":
            return eqx.tree_at(lambda s: s.pile, after, after.pile.astype(jnp.float32))
        if self.flaw == "extra leaf":
            return (after, jnp.int32(0))
        if self.flaw == "python state":
            _CALLS.append(None)  # state kept outside the environment's state
            return eqx.tree_at(lambda s: s.pile, after, after.pile - len(_CALLS) % 2)
        if self.flaw == "mixes a batch":
            # A host callback that reads every row of a jax.vmap batch at once.
            smallest = jax.pure_callback(
                lambda pile: np.broadcast_to(np.min(pile), np.shape(pile)).astype(np.int32),
                jax.ShapeDtypeStruct((), jnp.int32),
                after.pile,
                vmap_method="expand_dims",
            )
            return eqx.tree_at(lambda s: s.pile, after, smallest)
        if self.flaw == "restarts":
            fresh = self.game.init(key)
            return jax.tree.map(lambda f, a: jnp.where(state.terminated, f, a), fresh, after)
        if self.flaw == "rewards after the end":
            last = jnp.where(state.terminated, state.rewards, after.rewards)
            return eqx.tree_at(lambda s: s.rewards, after, last)
        return after

    def observation(self, state):
        observation = self.game.observation(state)
        if self.flaw == "observation shape":
            return observation[:-1]
        if self.flaw == "observation dtype":
            return observation.astype(jnp.int32)
        if self.flaw == "nan observation":
            return jnp.where(state.pile == 5, jnp.nan, observation)
        return observation

    def legal_action_mask(self, state):
        mask = self.game.legal_action_mask(state)
        if self.flaw == "mask of floats":
            return mask.astype(jnp.float32)
        if self.flaw == "no legal action":
            return mask & (state.pile != 4)
        return mask

    def rewards(self, state):
        rewards = self.game.rewards(state)
        if self.flaw == "one reward":
            return rewards[0]
        if self.flaw == "not zero-sum":
            return jnp.maximum(rewards, 0.0)
        return rewards

    def terminated(self, state):
        if self.flaw == "terminated as a vector":
            return state.terminated[None]
        return self.game.terminated(state)

    def truncated(self, state):
        if self.flaw == "truncation that ends":
            return (state.pile == 3) & ~state.terminated
        return self.game.truncated(state)

    def current_player(self, state):
        player = self.game.current_player(state)
        if self.flaw == "player as a float":
            return player.astype(jnp.float32)
        if self.flaw == "player out of range":
            return player + 1
        return player


def _check(env, **options):
    azx.envs.check_env(env, num_games=4, max_steps=24, **options)


@pytest.mark.parametrize(
    "env",
    [SubtractionGame(start_pile=10), Broken("none"), azx.envs.CueMemory(num_cues=2, delay=3)],
    ids=["subtraction", "wrapped", "cue_memory"],
)
def test_accepts_environments_that_keep_the_promises(env):
    _check(env)


def test_accepts_a_pgx_game():
    azx.envs.check_env(azx.envs.make("tic_tac_toe"), num_games=4, max_steps=12)


_BROKEN_PROMISES = [
    ("no actions", r"num_actions must be a positive Python int, got 0"),
    ("shape as a list", r"observation_shape must be a tuple of non-negative ints"),
    ("dtype as a string", r"observation_dtype must be a NumPy dtype"),
    ("observation shape", r"observation\(state\) must return float32\[11\], got float32\[10\]"),
    ("observation dtype", r"observation\(state\) must return float32\[11\], got int32\[11\]"),
    ("mask of floats", r"legal_action_mask\(state\) must return bool\[3\], got float32\[3\]"),
    ("one reward", r"rewards\(state\) must return floating\[2\], got float32\[\]"),
    ("terminated as a vector", r"terminated\(state\) must return bool\[\], got bool\[1\]"),
    ("player as a float", r"current_player\(state\) must return integer\[\], got float32"),
    ("pile becomes float", r"state\.pile is int32\[\] after init and float32\[\] after step"),
    ("extra leaf", r"step must return a state of the same structure"),
    ("python branch", r"step\(state, action, key\) fails when traced"),
    ("init keeps python state", r"init is not pure: two calls differ"),
    ("python state", r"step is not pure: two calls with the same state, action and key"),
    ("mixes a batch", r"step is not pure: row \d of a jax.vmap batch differs"),
    ("starts over", r"init must return a new episode, neither terminated nor truncated"),
    ("starts with a reward", r"rewards of a new episode \(after init\) must be zero"),
    ("nan observation", r"observation must be finite .*\(random game \d+, step \d+\)"),
    ("player out of range", r"current_player must lie in \[0, num_players\) = \[0, 2\)"),
    ("no legal action", r"legal_action_mask must allow at least one action"),
    ("restarts", r"a terminated episode must stay terminated"),
    ("truncation that ends", r"a truncated episode must stay truncated"),
    ("rewards after the end", r"step on a finished .* episode must give zero rewards"),
    ("not zero-sum", r"a two-player game's rewards must sum to zero"),
]


@pytest.mark.parametrize(
    ("flaw", "message"), _BROKEN_PROMISES, ids=[flaw for flaw, _ in _BROKEN_PROMISES]
)
def test_names_each_broken_promise(flaw, message):
    with pytest.raises(ValueError, match=r"^Broken: .*" + message):
        _check(Broken(flaw))


def test_warns_when_no_game_ends():
    with pytest.warns(UserWarning, match="no random game ended within max_steps=2"):
        azx.envs.check_env(Broken("none"), num_games=2, max_steps=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"num_games": 0}, "num_games"), ({"max_steps": -1}, "max_steps")],
)
def test_rejects_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        azx.envs.check_env(SubtractionGame(), **options)


# Registration: a user's own environment and preset, known by name.


@pytest.fixture
def registries(monkeypatch):
    """Fresh registries, so that a test's registrations end with it."""
    import azx.envs._registry

    monkeypatch.setattr(azx.envs._registry, "_REGISTERED", {})
    monkeypatch.setattr(azx.presets, "_PRESETS", dict(azx.presets._PRESETS))


def test_a_registered_environment_is_made_by_name(registries):
    azx.envs.register("subtraction", SubtractionGame)
    env = azx.envs.make("subtraction", start_pile=5)
    assert isinstance(env, SubtractionGame) and env.start_pile == 5
    assert "subtraction" in azx.envs.available()
    assert azx.envs.make("subtraction", observe_legal_moves=True).num_actions == 3
    with pytest.raises(ValueError, match=r"environment 'subtraction' does not take \['heaps'\]"):
        azx.envs.make("subtraction", heaps=3)


@pytest.mark.parametrize(
    ("name", "make_env", "message"),
    [
        ("my:game", SubtractionGame, "name must be a non-empty string without ':'"),
        ("", SubtractionGame, "name must be a non-empty string"),
        ("tic_tac_toe", SubtractionGame, "name 'tic_tac_toe' is a pgx game's"),
    ],
)
def test_register_rejects_bad_names_and_functions(registries, name, make_env, message):
    with pytest.raises(ValueError, match=message):
        azx.envs.register(name, make_env)


def test_make_rejects_what_a_registered_function_returns_if_not_an_environment(registries):
    azx.envs.register("nothing", lambda: None)
    with pytest.raises(ValueError, match="registered as 'nothing' must return an azx.envs"):
        azx.envs.make("nothing")


def test_a_registered_preset_is_found_and_builds(registries):
    azx.envs.register("subtraction", SubtractionGame)
    preset = azx.presets.Preset(
        name="subtraction_game",
        env="subtraction",
        network="mlp",
        network_options={"width": 16, "depth": 1},
        recipe=azx.presets.AlphaZeroRecipe(search="puct", search_options={"num_simulations": 4}),
        config=azx.alphazero.Config(
            num_envs=4, collect_steps=2, train_steps=1, batch_size=8, buffer_capacity=64
        ),
        iterations=10,
        env_options={"start_pile": 7},
    )
    azx.presets.register(preset)
    assert azx.presets.get("subtraction_game") is preset
    assert azx.presets.names()[-1] == "subtraction_game"
    trainer, _ = azx.presets.from_dict(preset.to_dict()).build(seed=0)
    assert isinstance(trainer.env, SubtractionGame) and trainer.env.start_pile == 7


@pytest.mark.parametrize(
    ("preset", "message"),
    [
        (azx.presets.get("othello"), "preset name 'othello' is taken by azx's own presets"),
        (azx.presets.get("othello").replace(name="pgx:go"), "preset name 'pgx:go' is taken"),
    ],
)
def test_register_rejects_what_is_not_a_new_preset(registries, preset, message):
    with pytest.raises(ValueError, match=message):
        azx.presets.register(preset)
