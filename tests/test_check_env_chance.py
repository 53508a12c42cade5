"""`azx.envs.check_env` on chance games: a small user-written dice game (Pig), correct and
with one flaw each, each flaw named by its own error; azx's own chance games pass."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Bool, Float, Int

import azx
from azx.envs._check import _binomial_p_value


class PigState(eqx.Module):
    scores: Int[Array, "2"]
    turn_total: Int[Array, ""]
    player: Int[Array, ""]
    rewards: Float[Array, "2"]
    terminated: Bool[Array, ""]


class PigAfterstate(eqx.Module):
    state: PigState
    rolls: Bool[Array, ""]


class Pig(azx.envs.AbstractChanceEnv):
    """Pig to `goal` with a die of `faces` faces: roll (action 0) to add the pips to the
    turn's total, or hold (action 1, once the total is positive) to bank it; a one loses
    the total and passes the turn, and whoever reaches `goal` wins at once. `flaw` breaks
    one promise of the chance interface."""

    name = "pig"

    goal: int = eqx.field(static=True)
    faces: int = eqx.field(static=True)
    flaw: str = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    num_outcomes: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, goal: int = 8, faces: int = 3, flaw: str = ""):
        self.goal, self.faces, self.flaw = goal, faces, flaw
        self.num_actions, self.num_players = 2, 2
        self.num_outcomes = 0 if flaw == "no outcomes" else faces
        self.observation_shape = (3 * goal,)
        self.observation_dtype = jnp.dtype(jnp.float32)

    def init(self, key):
        del key
        return PigState(
            jnp.zeros(2, jnp.int32), jnp.int32(0), jnp.int32(0), jnp.zeros(2), jnp.bool_(False)
        )

    def afterstate(self, state, action):
        return PigAfterstate(state, (action == 0) & ~state.terminated)

    def has_chance(self, afterstate):
        if self.flaw == "random without chance":
            return jnp.bool_(False)
        return afterstate.rolls

    def chance_probabilities(self, afterstate):
        die = jnp.full(self.faces, 1 / self.faces, jnp.float32)
        if self.flaw == "not summing to one":
            die = jnp.full(self.faces, 1 / (self.faces + 1), jnp.float32)
        if self.flaw == "negative":
            die = die.at[0].add(-0.5).at[1].add(0.5)
        one_state = jax.nn.one_hot(0, self.faces, dtype=jnp.float32)
        if self.flaw == "mass off outcome 0":
            return die
        return jnp.where(self.has_chance(afterstate), die, one_state)

    def chance_outcome_mask(self, afterstate):
        if self.flaw == "mask":
            return jnp.ones(self.faces, bool)
        return self.chance_probabilities(afterstate) > 0

    def sample_outcome(self, afterstate, key):
        if self.flaw == "loaded sampler":
            loaded = jnp.log(jnp.full(self.faces, 1.0).at[0].set(self.faces))
            return jax.random.categorical(key, loaded).astype(jnp.int32)
        probabilities = self.chance_probabilities(afterstate)
        logits = jnp.where(probabilities > 0, jnp.log(probabilities), -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    def apply_outcome(self, afterstate, outcome):
        state, rolls = afterstate.state, afterstate.rolls
        mover = state.player
        total = state.turn_total + outcome + 1
        bust = outcome == 0  # a one
        won = rolls & ~bust & (state.scores[mover] + total >= self.goal)
        # Holding banks the turn's total, winning the rolled one.
        banked = jnp.where(rolls, jnp.where(won, total, 0), state.turn_total)
        passes = ~rolls | bust
        sign = jnp.where(jnp.arange(2) == mover, 1.0, -1.0)
        over = state.terminated if self.flaw != "forgets the end" else jnp.bool_(False)
        new = PigState(
            scores=state.scores.at[mover].add(banked),
            turn_total=jnp.where(passes | won, 0, total),
            player=jnp.where(passes, 1 - mover, mover),
            rewards=jnp.where(won, sign, 0.0).astype(jnp.float32),
            terminated=over | won,
        )
        # A finished game stays as it is, with zero rewards.
        kept = eqx.tree_at(lambda s: s.rewards, state, jnp.zeros(2))
        new = jax.tree.map(lambda k, n: jnp.where(over, k, n), kept, new)
        return (new, outcome) if self.flaw == "extra output" else new

    def step(self, state, action, key):
        after = self.afterstate(state, action)
        if self.flaw in ("loaded step", "random without chance", "loaded sampler"):
            # Its own die, not the one chance_probabilities describes.
            weights = jnp.full(self.faces, 1.0)
            if self.flaw == "loaded step":
                weights = weights.at[0].set(self.faces)
            outcome = jax.random.categorical(key, jnp.log(weights)).astype(jnp.int32)
            outcome = jnp.where(after.rolls, outcome, 0)
        else:
            outcome = self.sample_outcome(after, key)
        state = self.apply_outcome(after, outcome)
        if self.flaw == "extra output":
            state = state[0]
        if self.flaw == "one keeps the turn":
            keeps = after.rolls & (outcome == 0)
            state = eqx.tree_at(
                lambda s: s.player, state, jnp.where(keeps, after.state.player, state.player)
            )
        if self.flaw == "forgets the end":  # step itself stops at the end
            state = jax.tree.map(
                lambda old, new: jnp.where(after.state.terminated, old, new),
                eqx.tree_at(lambda s: s.rewards, after.state, jnp.zeros(2)),
                state,
            )
        return state

    def observation(self, state):
        mover = state.player
        parts = (state.scores[mover], state.scores[1 - mover], state.turn_total)
        return jnp.concatenate([jax.nn.one_hot(x, self.goal, dtype=jnp.float32) for x in parts])

    def legal_action_mask(self, state):
        return jnp.stack([jnp.bool_(True), state.turn_total > 0])

    def rewards(self, state):
        return state.rewards

    def terminated(self, state):
        return state.terminated

    def truncated(self, state):
        return jnp.bool_(False)

    def current_player(self, state):
        return state.player


class PigWithoutInterface(azx.envs.AbstractEnv):
    """Pig's methods, chance ones too, on a class that is not an AbstractChanceEnv."""

    name = "pig"

    pig: Pig
    num_actions: int = eqx.field(static=True, default=2)
    num_players: int = eqx.field(static=True, default=2)
    num_outcomes: int = eqx.field(static=True, default=3)
    observation_shape: tuple[int, ...] = eqx.field(static=True, default=(24,))
    observation_dtype: jnp.dtype = eqx.field(static=True, default=jnp.dtype(jnp.float32))

    def init(self, key):
        return self.pig.init(key)

    def step(self, state, action, key):
        return self.pig.step(state, action, key)

    def afterstate(self, state, action):
        return self.pig.afterstate(state, action)

    def has_chance(self, afterstate):
        return self.pig.has_chance(afterstate)

    def chance_probabilities(self, afterstate):
        return self.pig.chance_probabilities(afterstate)

    def apply_outcome(self, afterstate, outcome):
        return self.pig.apply_outcome(afterstate, outcome)

    def observation(self, state):
        return self.pig.observation(state)

    def legal_action_mask(self, state):
        return self.pig.legal_action_mask(state)

    def rewards(self, state):
        return self.pig.rewards(state)

    def terminated(self, state):
        return self.pig.terminated(state)

    def truncated(self, state):
        return self.pig.truncated(state)

    def current_player(self, state):
        return self.pig.current_player(state)


def _check(env, **options):
    azx.envs.check_env(env, num_games=8, max_steps=40, **options)


def _exact_pig_value(goal: int, faces: int) -> float:
    """The first player's winning chance in Pig under optimal play, by value iteration:
    the game's independent reference (check_env must accept the game that has it)."""
    value = np.zeros((goal, goal, goal))  # [mover's score, other's score, turn total]
    for _ in range(2000):
        new = np.zeros_like(value)
        for a in range(goal):
            for b in range(goal):
                for t in range(goal - a):
                    roll = (1 - value[b, a, 0]) / faces
                    for pips in range(2, faces + 1):
                        roll += (1.0 if a + t + pips >= goal else value[a, b, t + pips]) / faces
                    hold = 1 - value[b, a + t, 0] if t > 0 else 0.0
                    new[a, b, t] = max(roll, hold)
        if np.abs(new - value).max() < 1e-12:
            break
        value = new
    return float(value[0, 0, 0])


def test_accepts_a_correct_dice_game_whose_rules_match_an_exact_solution():
    game = Pig()
    _check(game)
    # The same game's first player, played by sampling `step`: the first move must be a
    # roll, and the roll's outcomes have the probabilities the interface states.
    first = _exact_pig_value(game.goal, game.faces)
    assert 0.5 < first < 1.0
    after = game.afterstate(game.init(jax.random.key(0)), jnp.int32(0))
    np.testing.assert_allclose(game.chance_probabilities(after), np.full(3, 1 / 3), rtol=1e-6)


@pytest.mark.slow  # (the default run checks the guide's Pig and its broken variants)
@pytest.mark.parametrize("name", ["2048", "backgammon"])
def test_accepts_azx_chance_games(name):
    env = azx.envs.make(name)
    if name == "backgammon":  # random games of backgammon outlast a short check
        with pytest.warns(UserWarning, match="no random game ended"):
            azx.envs.check_env(env, num_games=4, max_steps=60, chance_samples=400)
    else:
        azx.envs.check_env(env, num_games=4, max_steps=120, chance_samples=400)


_BROKEN_PROMISES = [
    ("no outcomes", r"num_outcomes must be a positive Python int, got 0"),
    ("extra output", r"apply_outcome must return a state of the same structure as"),
    ("negative", r"chance_probabilities\(afterstate\) must be finite and non-negative"),
    ("mask", r"chance_outcome_mask\(afterstate\) must be true exactly where"),
    ("not summing to one", r"must sum to 1 over the outcome mask, sums to 0\.75"),
    ("mass off outcome 0", r"where has_chance\(afterstate\) is false, .* on outcome 0"),
    ("loaded step", r"step\(state, action, key\) is not distributed as apply_outcome"),
    ("one keeps the turn", r"gives a state that apply_outcome\(.*\) gives for no outcome"),
    ("random without chance", r"has_chance\(afterstate\) is false, but step.* different"),
    ("loaded sampler", r"sample_outcome\(afterstate, key\) is not distributed as"),
    ("forgets the end", r"apply_outcome at a finished .* must keep it finished"),
]


@pytest.mark.parametrize(
    ("flaw", "message"), _BROKEN_PROMISES, ids=[flaw for flaw, _ in _BROKEN_PROMISES]
)
def test_names_each_broken_chance_promise(flaw, message):
    with pytest.raises(ValueError, match=r"^Pig: .*" + message):
        _check(Pig(flaw=flaw))


def test_names_chance_methods_without_the_interface():
    with pytest.raises(
        ValueError,
        match=r"^PigWithoutInterface: it has chance methods \(afterstate, has_chance, "
        r"chance_probabilities, apply_outcome\) but does not subclass "
        r"azx\.envs\.AbstractChanceEnv",
    ):
        _check(PigWithoutInterface(Pig()))


def test_binomial_p_value_matches_the_binomial_distribution():
    # Against the pmf summed directly with exact integer arithmetic.
    def exact(count, trials, p):
        pmf = [math.comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(trials + 1)]
        return min(1.0, 2 * min(sum(pmf[: count + 1]), sum(pmf[count:])))

    for count, trials, p in [(0, 10, 0.5), (5, 10, 0.5), (2, 40, 1 / 3), (30, 40, 1 / 3)]:
        assert _binomial_p_value(count, trials, p) == pytest.approx(exact(count, trials, p))
    assert _binomial_p_value(0, 10, 0.0) == 1.0 and _binomial_p_value(1, 10, 0.0) == 0.0
    assert _binomial_p_value(10, 10, 1.0) == 1.0 and _binomial_p_value(9, 10, 1.0) == 0.0
