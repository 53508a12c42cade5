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


def main() -> int:
    out = protocol_stdout()
    if len(sys.argv) != 2:
        print("usage: _rejax_worker.py JSON", file=sys.stderr)
        return 2
    spec = json.loads(sys.argv[1])
    worker = Worker(spec["config"], int(spec.get("iterations", 10)), int(spec.get("seed", 0)))
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
