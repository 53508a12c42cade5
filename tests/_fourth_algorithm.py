"""REINFORCE (Williams 1992) on CartPole: an algorithm that azx does not ship, in one
module, trained and judged by `azx train`, `azx eval` and `azx.load_run` through its
registered recipe and preset alone.

Each iteration plays one `horizon`-step episode from a fresh start in every row, sampling
the policy of an `azx.nets.ActorCritic` (its value head unused), and takes one Adam step
on the log-probability of each action weighted by the return that followed it.
`register()` registers the recipe (`"reinforce"`) and the preset
(`"reinforce_cartpole"`).
"""

import dataclasses
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

import azx
from azx import envs, nets, presets


@dataclasses.dataclass(frozen=True)
class Config:
    num_envs: int = 8
    """Rows, one episode each per iteration."""
    horizon: int = 32
    """Steps of each episode (those after it ends count nothing)."""
    learning_rate: float = 1e-2


class Metrics(eqx.Module):
    loss: Float[Array, ""]
    episode_return: Float[Array, ""]
    """Mean return of the iteration's episodes (within `horizon` steps)."""


class TrainState(azx.AbstractTrainState):
    row_fields: ClassVar[tuple[str, ...]] = ()  # every row starts afresh each iteration
    params: PyTree[Array]
    opt_state: PyTree[Array]
    iteration: Int[Array, ""]
    key: PRNGKeyArray
    metrics: Metrics
    net_static: Any = eqx.field(static=True)


class Reinforce(azx.AbstractTrainer[TrainState]):
    env: envs.AbstractEnv
    config: Config = eqx.field(static=True)
    axis_name: str | None = eqx.field(static=True, default=None)

    @property
    def num_envs(self) -> int:
        return self.config.num_envs

    @property
    def env_steps_per_iteration(self) -> int:
        return self.config.num_envs * self.config.horizon

    def optimiser(self) -> optax.GradientTransformation:
        return optax.adam(self.config.learning_rate)

    def init(self, net, *, key) -> TrainState:
        params, net_static = eqx.partition(net, eqx.is_array)
        zero = jnp.float32(0.0)
        return TrainState(
            params=params,
            opt_state=self.optimiser().init(params),
            iteration=jnp.int32(0),
            key=key,
            metrics=Metrics(loss=zero, episode_return=zero),
            net_static=net_static,
        )

    def episode(self, params, net_static, key):
        """One row's episode: the REINFORCE loss of its actions and its return."""
        env, net = self.env, eqx.combine(params, net_static)
        start_key, key = jax.random.split(key)

        def move(carry, key):
            env_state, alive = carry
            action_key, step_key = jax.random.split(key)
            logits, _ = net(env.observation(env_state))
            action = jax.random.categorical(action_key, logits)
            env_state = env.step(env_state, action, step_key)
            reward = jnp.where(alive, env.rewards(env_state)[0], 0.0)
            log_prob = jnp.where(alive, jax.nn.log_softmax(logits)[action], 0.0)
            alive = alive & ~(env.terminated(env_state) | env.truncated(env_state))
            return (env_state, alive), (log_prob, reward)

        keys = jax.random.split(key, self.config.horizon)
        start = (env.init(start_key), jnp.bool_(True))
        _, (log_probs, rewards) = jax.lax.scan(move, start, keys)
        returns_to_go = jax.lax.stop_gradient(jnp.cumsum(rewards[::-1])[::-1])
        return -jnp.sum(log_probs * returns_to_go), jnp.sum(rewards)

    def step(self, state: TrainState, key) -> TrainState:
        shards = 1 if self.axis_name is None else jax.lax.psum(1, self.axis_name)
        rows = self.num_envs // shards
        keys = jax.vmap(jax.random.fold_in, (None, 0))(key, self.first_row(rows) + jnp.arange(rows))

        def total_loss(params):
            losses, returns = jax.vmap(self.episode, (None, None, 0))(
                params, state.net_static, keys
            )
            return jnp.sum(losses), (jnp.sum(losses), jnp.sum(returns))

        grads, sums = jax.grad(total_loss, has_aux=True)(state.params)
        params, opt_state = self.apply_gradients(
            self.optimiser(), state.params, state.opt_state, grads, jnp.float32(rows)
        )
        loss, episode_return = (self.sum_over_shards(x) / self.num_envs for x in sums)
        return dataclasses.replace(
            state,
            params=params,
            opt_state=opt_state,
            iteration=state.iteration + 1,
            metrics=Metrics(loss=loss, episode_return=episode_return),
        )

    def with_axis_name(self, axis_name):
        return Reinforce(self.env, self.config, axis_name)


_play = eqx.filter_jit(azx.ppo.evaluate)


@dataclasses.dataclass(frozen=True)
class ReinforceRecipe(presets.AbstractPolicyRecipe):
    name: ClassVar[str] = "reinforce"
    config_class: ClassVar[type] = Config
    schedule: ClassVar[str | None] = None
    networks: ClassVar[tuple[str, ...]] = ("actor_critic",)

    eval_episodes: int = 8
    eval_greedy: bool = False

    def make_network(self, network, options, env, *, key):
        return nets.ActorCritic(env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return Reinforce(env, config)

    def record(self, trainer, state, history, rate):
        return {
            "loss": float(jnp.mean(history.loss)),
            "episode_return": float(jnp.mean(history.episode_return)),
            "steps_per_s": rate,
        }

    def progress(self, record):
        return f"return {record['episode_return']:.3g}"

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        greedy = self.eval_greedy if greedy is None else greedy
        return _play(trainer.env, state.net, num_episodes=num_episodes, key=key, greedy=greedy)


PRESET = presets.Preset(
    name="reinforce_cartpole",
    env="gymnax:CartPole-v1",
    network="actor_critic",
    network_options={"hidden_sizes": (16,)},
    recipe=ReinforceRecipe(),
    config=Config(),
    iterations=4,
    eval_every=2,
    log_every=1,
)


def register() -> None:
    """What a user's module does to make the algorithm known to `azx train`, `azx eval`
    and `azx.load_run`."""
    presets.register_recipe(ReinforceRecipe)
    presets.register(PRESET)
