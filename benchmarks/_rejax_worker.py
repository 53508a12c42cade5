"""Runs rejax's PPO inside the reference virtual environment, driven over stdin and stdout.

This script is the far side of `benchmarks/_reference.py`. It never runs in azx's own
environment: rejax 0.1.3 needs gymnax 0.0.9, so `_reference.py` starts it with the Python of a
separate virtual environment, as

    python -I _rejax_worker.py '{"config": {...}, "iterations": 10, "seed": 0}'

The command-line JSON holds the PPO configuration (the keys of `CONFIG_KEYS`), the number of
training iterations that one call of the compiled function runs, and a seed. The worker builds
`rejax.PPO` for the environment (gymnax CartPole-v1 by default) with exactly that
configuration: no observation or reward normalisation, no evaluation during training. The
timed function is a `jax.lax.scan` over rejax's own `PPO.train_iteration` (rollout, GAE and the
epochs of minibatch updates) applied to the train state from `PPO.init_state`; rejax's `train`
loop, which interleaves evaluation callbacks, is never used.

With `"system": "purejaxrl"` in the JSON the worker runs `one_program_ppo` instead: a PPO
written for the benchmark the way purejaxrl writes it (discrete actions), whose every
`{"iterations": K}` request is a fresh run, initialisation included, as one jitted program;
it answers no `evaluate` request.

Protocol: after compiling, the worker writes one JSON line
`{"ready": true, "compile_seconds": ..., "versions": {...}, ...}` to stdout, then answers one
JSON line per request line on stdin, until stdin closes:

- `{"iterations": K}` runs K training iterations from the current state and answers
  `{"seconds": ..., "env_steps": ..., "global_step": ...}`; a K other than the compiled one is
  compiled first, outside the timing, and the answer then also carries `compile_seconds`.
- `{"evaluate": N}` plays N episodes with the current policy through rejax's own
  `rejax.evaluate.evaluate` (actions sampled from the policy, as rejax evaluates) and answers
  `{"mean_return": ..., "mean_length": ..., "episodes": N}`.

A request that fails is answered `{"error": "..."}` and the worker goes on. Anything that
libraries print goes to stderr, so stdout carries the protocol only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from importlib import metadata
from typing import Any, TextIO


#: The PPO hyperparameters a configuration must give, all of them.
CONFIG_KEYS = (
    "num_envs",
    "num_steps",
    "num_epochs",
    "num_minibatches",
    "learning_rate",
    "max_grad_norm",
    "gamma",
    "gae_lambda",
    "clip_eps",
    "ent_coef",
    "vf_coef",
    "hidden_layer_sizes",
    "activation",
)
#: Keys a configuration may give, with their defaults.
OPTIONAL_KEYS = {"env": "CartPole-v1"}

VERSIONED = ("jax", "jaxlib", "rejax", "gymnax", "flax", "optax", "distrax", "chex", "numpy")


def protocol_stdout() -> TextIO:
    """Keeps the real stdout for the protocol and points file descriptor 1 at stderr."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return out


def send(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


class Worker:
    """One rejax PPO agent: its algorithm object, its train state and compiled functions."""

    def __init__(self, config: dict[str, Any], iterations: int, seed: int) -> None:
        import jax
        from rejax import PPO

        missing = [key for key in CONFIG_KEYS if key not in config]
        unknown = [key for key in config if key not in CONFIG_KEYS and key not in OPTIONAL_KEYS]
        if missing or unknown:
            raise ValueError(f"config keys missing: {missing}, unknown: {unknown}")
        config = {**OPTIONAL_KEYS, **config}

        self.jax = jax
        self.algo = PPO.create(
            env=config["env"],
            num_envs=int(config["num_envs"]),
            num_steps=int(config["num_steps"]),
            num_epochs=int(config["num_epochs"]),
            num_minibatches=int(config["num_minibatches"]),
            learning_rate=float(config["learning_rate"]),
            max_grad_norm=float(config["max_grad_norm"]),
            gamma=float(config["gamma"]),
            gae_lambda=float(config["gae_lambda"]),
            clip_eps=float(config["clip_eps"]),
            ent_coef=float(config["ent_coef"]),
            vf_coef=float(config["vf_coef"]),
            normalize_observations=False,
            normalize_rewards=False,
            skip_initial_evaluation=True,
            agent_kwargs={
                "hidden_layer_sizes": tuple(int(n) for n in config["hidden_layer_sizes"]),
                "activation": str(config["activation"]),
            },
        )
        self.env_steps_per_iteration = self.algo.num_envs * self.algo.num_steps
        train_key, self.eval_key = jax.random.split(jax.random.PRNGKey(seed))

        start = time.perf_counter()
        self.state = jax.block_until_ready(jax.jit(self.algo.init_state)(train_key))
        self.init_seconds = time.perf_counter() - start

        self.iterations = iterations
        self.train_fns: dict[int, Any] = {}
        self.eval_fns: dict[int, Any] = {}
        self.compile_seconds = self.compile_train(iterations)

    def compile_train(self, iterations: int) -> float:
        """Compiles the K-iteration training function ahead of time; returns the seconds."""
        jax = self.jax
        algo = self.algo

        def train(state):
            def body(state, _):
                return algo.train_iteration(state), None

            return jax.lax.scan(body, state, None, length=iterations)[0]

        start = time.perf_counter()
        self.train_fns[iterations] = jax.jit(train, donate_argnums=0).lower(self.state).compile()
        return time.perf_counter() - start

    def train(self, iterations: int) -> dict[str, Any]:
        if not isinstance(iterations, int) or iterations < 1:
            raise ValueError(f"iterations must be a positive integer, not {iterations!r}")
        answer: dict[str, Any] = {}
        if iterations not in self.train_fns:
            answer["compile_seconds"] = self.compile_train(iterations)
        train = self.train_fns[iterations]
        start = time.perf_counter()
        self.state = self.jax.block_until_ready(train(self.state))
        seconds = time.perf_counter() - start
        return {
            "seconds": seconds,
            "env_steps": iterations * self.env_steps_per_iteration,
            "global_step": int(self.state.global_step),
            **answer,
        }

    def evaluate(self, episodes: int) -> dict[str, Any]:
        if not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"evaluate takes a positive number of episodes, not {episodes!r}")
        jax = self.jax
        if episodes not in self.eval_fns:
            from rejax.evaluate import evaluate

            algo = self.algo

            def run(state, key):
                act = algo.make_act(state)
                max_steps = algo.env_params.max_steps_in_episode
                return evaluate(act, key, algo.env, algo.env_params, episodes, max_steps)

            self.eval_fns[episodes] = jax.jit(run)
        self.eval_key, key = jax.random.split(self.eval_key)
        lengths, returns = self.eval_fns[episodes](self.state, key)
        return {
            "mean_return": float(returns.mean()),
            "mean_length": float(lengths.mean()),
            "episodes": episodes,
        }

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if "iterations" in request:
            return self.train(request["iterations"])
        if "evaluate" in request:
            return self.evaluate(request["evaluate"])
        raise ValueError(f"unknown request {request!r}")


def one_program_ppo(config: dict[str, Any], iterations: int):
    """purejaxrl's way of running PPO, written for this benchmark: `train(key)` builds the
    network, the optimiser and the environments and runs `iterations` training iterations,
    all inside one jitted program. A discrete-action gymnax environment; the same
    hyperparameters as the rejax agent (constant learning rate, Adam with eps 1e-5 after
    global-norm clipping, orthogonal initialisation, separate 64x64 actor and critic
    torsos, gymnax's own step that resets ended episodes, done treated as termination,
    the advantage standardised per minibatch, one permutation of all samples per epoch).
    """
    import distrax
    import flax.linen as nn
    import gymnax
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax.linen.initializers import constant, orthogonal

    env, env_params = gymnax.make(config["env"])
    num_actions = env.action_space(env_params).n
    observation_shape = env.observation_space(env_params).shape
    envs, steps = int(config["num_envs"]), int(config["num_steps"])
    epochs, minibatches = int(config["num_epochs"]), int(config["num_minibatches"])
    gamma, lam = float(config["gamma"]), float(config["gae_lambda"])
    clip_eps = float(config["clip_eps"])
    ent_coef, vf_coef = float(config["ent_coef"]), float(config["vf_coef"])
    hidden = tuple(int(n) for n in config["hidden_layer_sizes"])
    activation = {"tanh": nn.tanh, "relu": nn.relu}[config["activation"]]
    samples = envs * steps

    class Network(nn.Module):
        @nn.compact
        def __call__(self, x):
            def torso(h):
                for width in hidden:
                    h = nn.Dense(
                        width, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0)
                    )(h)
                    h = activation(h)
                return h

            logits = nn.Dense(num_actions, kernel_init=orthogonal(0.01), bias_init=constant(0.0))(
                torso(x)
            )
            value = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(torso(x))
            return distrax.Categorical(logits=logits), value[..., 0]

    network = Network()
    optimiser = optax.chain(
        optax.clip_by_global_norm(float(config["max_grad_norm"])),
        optax.adam(float(config["learning_rate"]), eps=1e-5),
    )

    def loss(params, batch):
        observation, action, old_log_prob, old_value, advantage, target = batch
        policy, value = network.apply(params, observation)
        log_prob = policy.log_prob(action)
        clipped_value = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
        value_loss = (
            0.5 * jnp.maximum(jnp.square(value - target), jnp.square(clipped_value - target)).mean()
        )
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        ratio = jnp.exp(log_prob - old_log_prob)
        surrogate = jnp.minimum(
            ratio * advantage, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * advantage
        )
        return -surrogate.mean() + vf_coef * value_loss - ent_coef * policy.entropy().mean()

    def iteration(carry, _):
        params, opt_state, env_state, observation, episode_return, key = carry

        def env_step(carry, _):
            env_state, observation, episode_return, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            policy, value = network.apply(params, observation)
            action = policy.sample(seed=action_key)
            log_prob = policy.log_prob(action)
            next_observation, env_state, reward, done, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(step_key, envs), env_state, action, env_params)
            # As purejaxrl's LogWrapper: the running return, and the last finished one.
            running, finished = episode_return
            running = running + reward
            episode_return = (jnp.where(done, 0.0, running), jnp.where(done, running, finished))
            transition = (observation, action, log_prob, value, reward, done)
            return (env_state, next_observation, episode_return, key), transition

        (env_state, observation, episode_return, key), trajectory = jax.lax.scan(
            env_step, (env_state, observation, episode_return, key), None, steps
        )
        obs, action, log_prob, value, reward, done = trajectory
        last_value = network.apply(params, observation)[1]

        def gae_step(carry, transition):
            advantage, next_value = carry
            value, reward, done = transition
            keep = 1.0 - done
            delta = reward + gamma * next_value * keep - value
            advantage = delta + gamma * lam * keep * advantage
            return (advantage, value), advantage

        _, advantage = jax.lax.scan(
            gae_step, (jnp.zeros_like(last_value), last_value), (value, reward, done), reverse=True
        )
        batch = (obs, action, log_prob, value, advantage, advantage + value)
        batch = jax.tree.map(lambda x: x.reshape(samples, *x.shape[2:]), batch)

        def epoch(carry, _):
            params, opt_state, key = carry
            key, shuffle_key = jax.random.split(key)
            order = jax.random.permutation(shuffle_key, samples)
            shuffled = jax.tree.map(
                lambda x: x[order].reshape(minibatches, -1, *x.shape[1:]), batch
            )

            def update(carry, minibatch):
                params, opt_state = carry
                grads = jax.grad(loss)(params, minibatch)
                updates, opt_state = optimiser.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), None

            (params, opt_state), _ = jax.lax.scan(update, (params, opt_state), shuffled)
            return (params, opt_state, key), None

        (params, opt_state, key), _ = jax.lax.scan(epoch, (params, opt_state, key), None, epochs)
        return (params, opt_state, env_state, observation, episode_return, key), None

    def train(key):
        init_key, reset_key, key = jax.random.split(key, 3)
        params = network.init(init_key, jnp.zeros(observation_shape))
        observation, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, envs), env_params
        )
        returns = (jnp.zeros(envs), jnp.zeros(envs))
        carry = (params, optimiser.init(params), env_state, observation, returns, key)
        return jax.lax.scan(iteration, carry, None, iterations)[0]

    return train


class OneProgramWorker:
    """purejaxrl-style PPO (`one_program_ppo`): each `train` request runs a whole fresh
    run of the compiled number of iterations, initialisation included, as one program."""

    def __init__(self, config: dict[str, Any], iterations: int, seed: int) -> None:
        import jax

        config = {**OPTIONAL_KEYS, **config}
        self.jax = jax
        self.config = config
        self.env_steps_per_iteration = int(config["num_envs"]) * int(config["num_steps"])
        self.key = jax.random.PRNGKey(seed)
        self.global_step = 0
        self.init_seconds = 0.0
        self.iterations = iterations
        self.train_fns: dict[int, Any] = {}
        self.compile_seconds = self.compile_train(iterations)

    def compile_train(self, iterations: int) -> float:
        start = time.perf_counter()
        train = self.jax.jit(one_program_ppo(self.config, iterations))
        self.train_fns[iterations] = train.lower(self.key).compile()
        return time.perf_counter() - start

    def train(self, iterations: int) -> dict[str, Any]:
        if not isinstance(iterations, int) or iterations < 1:
            raise ValueError(f"iterations must be a positive integer, not {iterations!r}")
        answer: dict[str, Any] = {}
        if iterations not in self.train_fns:
            answer["compile_seconds"] = self.compile_train(iterations)
        self.key, key = self.jax.random.split(self.key)
        start = time.perf_counter()
        self.jax.block_until_ready(self.train_fns[iterations](key))
        seconds = time.perf_counter() - start
        self.global_step += iterations * self.env_steps_per_iteration
        return {
            "seconds": seconds,
            "env_steps": iterations * self.env_steps_per_iteration,
            "global_step": self.global_step,
            **answer,
        }

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if "iterations" in request:
            return self.train(request["iterations"])
        raise ValueError(f"the one-program PPO answers training requests only, not {request!r}")


def main() -> int:
    out = protocol_stdout()
    if len(sys.argv) != 2:
        print("usage: _rejax_worker.py JSON", file=sys.stderr)
        return 2
    spec = json.loads(sys.argv[1])
    systems = {"rejax": Worker, "purejaxrl": OneProgramWorker}
    system = spec.get("system", "rejax")
    if system not in systems:
        print(f"system must be one of {sorted(systems)}, not {system!r}", file=sys.stderr)
        return 2
    args = spec["config"], int(spec.get("iterations", 10)), int(spec.get("seed", 0))
    worker = systems[system](*args)
    import jax

    send(
        out,
        {
            "ready": True,
            "compile_seconds": worker.compile_seconds,
            "init_seconds": worker.init_seconds,
            "iterations": worker.iterations,
            "env_steps_per_iteration": worker.env_steps_per_iteration,
            "devices": [str(device) for device in jax.devices()],
            "versions": {name: metadata.version(name) for name in VERSIONED}
            | {"python": sys.version.split()[0]},
        },
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = worker.handle(json.loads(line))
        except Exception as error:  # every failure goes back to the driver
            traceback.print_exc(file=sys.stderr)
            answer = {"error": f"{type(error).__name__}: {error}"}
        send(out, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
