"""Seed 002's recurrent PPO written independently of azx, in plain JAX, to compare the two
seed by seed on the same machine and with the same evaluation.

    python -m benchmarks.seed002 --seeds 10 --threshold 0.8 [--embedding standard_normal]

The system of `shared/seeds/002_*.txt` (XLand-MiniGrid's single-task recurrent PPO, written
there with flax) at its small size, on MiniGrid-Empty-6x6: three 2x2 convolutions (16, 32,
64 channels) over the symbolic 7x7 view, the previous action embedded in 16 numbers and the
previous reward appended, one GRU of 16 units, policy and value heads with a tanh hidden
layer of 16; 64 environments x 16 steps, one epoch of 16 minibatches (4 whole sequences
each, environments shuffled together), Adam at 1e-3 annealed linearly over the 97
iterations of 10^5 steps, time-outs treated as terminal, the memory (and the previous action
and reward) never reset. Every weight starts as flax starts the seed's: orthogonal
convolutions and heads, a Glorot-normal and orthogonal GRU, zero biases and flax's
`nn.Embed` default for the embedding (`--embedding standard_normal`: Equinox's instead).

The whole run (initialisation, 97 iterations) is one jitted program; then 100 episodes of
the sampled policy, each from a fresh memory, as `azx.ppo.evaluate` plays them, give the
mean return. Printed as `benchmarks.ppo_learning` prints azx's seeds.
"""

import argparse
import json
import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax


NUM_ENVS, NUM_STEPS, NUM_MINIBATCHES = 64, 16, 16
TOTAL_STEPS = 100_000
ITERATIONS = TOTAL_STEPS // NUM_STEPS // NUM_ENVS  # 97, as the seed computes it
HIDDEN, HEAD, EMBEDDING = 16, 16, 16
LEARNING_RATE, MAX_GRAD_NORM, ADAM_EPS = 1e-3, 0.5, 1e-8
GAMMA, GAE_LAMBDA, CLIP_EPS, VALUE_COEF, ENTROPY_COEF = 0.99, 0.95, 0.2, 0.5, 0.01
CHANNELS = (16, 32, 64)


def _environment():
    import xminigrid
    from xminigrid.wrappers import GymAutoResetWrapper

    env, params = xminigrid.make("MiniGrid-Empty-6x6")
    return env, GymAutoResetWrapper(env), params


# --------------------------------------------------------------------------- the network


def init_params(key, observation_shape, num_actions, embedding: str) -> dict[str, Any]:
    """The weights as flax's initialisers draw them for the seed's network."""
    init = jax.nn.initializers
    keys = iter(jax.random.split(key, 16))
    params: dict[str, Any] = {"conv": []}
    channels_in = observation_shape[-1]
    for channels_out in CHANNELS:
        kernel = init.orthogonal(math.sqrt(2))(next(keys), (2, 2, channels_in, channels_out))
        params["conv"].append((kernel, jnp.zeros(channels_out)))
        channels_in = channels_out
    height, width = observation_shape[0] - 3, observation_shape[1] - 3
    if embedding == "fan_in_normal":  # flax nn.Embed's default
        embed = init.variance_scaling(1.0, "fan_in", "normal", out_axis=0)
    else:
        embed = init.normal(1.0)
    params["embedding"] = embed(next(keys), (num_actions, EMBEDDING))
    gru_in = height * width * CHANNELS[-1] + EMBEDDING + 1
    params["gru"] = {
        "wi": init.glorot_normal(in_axis=1, out_axis=0)(next(keys), (3 * HIDDEN, gru_in)),
        "wh": init.orthogonal(column_axis=0)(next(keys), (3 * HIDDEN, HIDDEN)),
        "bi": jnp.zeros(3 * HIDDEN),
        "bn": jnp.zeros(HIDDEN),
    }

    def dense(size_in, size_out, gain):  # flax's Dense kernel: [in, out]
        return (init.orthogonal(gain)(next(keys), (size_in, size_out)), jnp.zeros(size_out))

    params["actor"] = (dense(HIDDEN, HEAD, 2.0), dense(HEAD, num_actions, 0.01))
    params["critic"] = (dense(HIDDEN, HEAD, 2.0), dense(HEAD, 1, 1.0))
    return params


def conv2x2(x, kernel):
    """A 2x2 convolution without padding of [N, H, W, C] grids with an [2, 2, C, C']
    kernel, as a sum of the four shifted grids' matrix products: on XLA:CPU, inside
    loops, much faster than `jax.lax.conv_general_dilated` on grids this small."""
    height, width = x.shape[1] - 1, x.shape[2] - 1
    return sum(
        x[:, dy : dy + height, dx : dx + width] @ kernel[dy, dx] for dy in (0, 1) for dx in (0, 1)
    )


def encode(params, observation):
    """[..., H, W, C] grids -> [..., features]."""
    x = observation.astype(jnp.float32)
    batch = x.shape[:-3]
    x = x.reshape(-1, *x.shape[-3:])
    for kernel, bias in params["conv"]:
        x = jax.nn.relu(conv2x2(x, kernel) + bias)
    return x.reshape(*batch, -1)


def gru_step(params, h, x):
    gru = params["gru"]
    i_reset, i_update, i_new = jnp.split(gru["wi"] @ x + gru["bi"], 3)
    h_reset, h_update, h_new = jnp.split(gru["wh"] @ h, 3)
    reset = jax.nn.sigmoid(i_reset + h_reset)
    update = jax.nn.sigmoid(i_update + h_update)
    new = jnp.tanh(i_new + reset * (h_new + gru["bn"]))
    return (1.0 - update) * new + update * h


def heads(params, h):
    def mlp(layers, x):
        (w1, b1), (w2, b2) = layers
        return jnp.tanh(x @ w1 + b1) @ w2 + b2

    return mlp(params["actor"], h), mlp(params["critic"], h)[0]


def unroll(params, h, observation, previous_action, previous_reward):
    """One environment's sequence ([steps, ...] inputs) from memory `h`: the logits and
    values of every step and the last memory."""
    x = jnp.concatenate(
        [
            encode(params, observation),
            params["embedding"][previous_action],
            previous_reward[:, None].astype(jnp.float32),
        ],
        axis=-1,
    )

    def step(h, x):
        h = gru_step(params, h, x)
        return h, h

    h, hs = jax.lax.scan(step, h, x)
    logits, values = jax.vmap(lambda hh: heads(params, hh))(hs)
    return logits, values, h


def act_one(params, h, observation, previous_action, previous_reward):
    logits, values, h = unroll(
        params, h, observation[None], previous_action[None], previous_reward[None]
    )
    return logits[0], values[0], h


# --------------------------------------------------------------------------- training


class Transition(NamedTuple):
    observation: jax.Array
    previous_action: jax.Array
    previous_reward: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array


def _optimiser():
    updates_per_iteration = NUM_MINIBATCHES  # one epoch

    def schedule(count):
        return LEARNING_RATE * (1.0 - (count // updates_per_iteration) / ITERATIONS)

    return optax.chain(optax.clip_by_global_norm(MAX_GRAD_NORM), optax.adam(schedule, eps=ADAM_EPS))


def _loss(params, start_h, batch: Transition, advantage, target):
    logits, value, _ = jax.vmap(lambda h, o, a, r: unroll(params, h, o, a, r))(
        start_h, batch.observation, batch.previous_action, batch.previous_reward
    )
    log_policy = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_policy, batch.action[..., None], -1)[..., 0]
    advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    clipped_value = batch.value + jnp.clip(value - batch.value, -CLIP_EPS, CLIP_EPS)
    value_loss = (
        0.5 * jnp.maximum(jnp.square(value - target), jnp.square(clipped_value - target)).mean()
    )
    ratio = jnp.exp(log_prob - batch.log_prob)
    policy_loss = -jnp.minimum(
        ratio * advantage, jnp.clip(ratio, 1 - CLIP_EPS, 1 + CLIP_EPS) * advantage
    ).mean()
    entropy = -(jnp.exp(log_policy) * log_policy).sum(-1).mean()
    return policy_loss + VALUE_COEF * value_loss - ENTROPY_COEF * entropy


class Carry(NamedTuple):
    """What one training iteration takes and gives: the parameters, the optimiser's state
    and every environment's timestep, previous action and reward, and memory."""

    params: Any
    opt_state: Any
    timestep: Any
    previous_action: jax.Array
    previous_reward: jax.Array
    memory: jax.Array


def initial_carry(key, embedding: str, env, env_params) -> tuple[Carry, jax.Array]:
    """The state before the first iteration, drawn from `key` as the seed draws it, and
    the key the iterations' keys are split from."""
    init_key, reset_key, key = jax.random.split(key, 3)
    timestep = jax.vmap(env.reset, in_axes=(None, 0))(
        env_params, jax.random.split(reset_key, NUM_ENVS)
    )
    params = init_params(
        init_key, timestep.observation.shape[1:], env.num_actions(env_params), embedding
    )
    carry = Carry(
        params,
        _optimiser().init(params),
        timestep,
        jnp.zeros(NUM_ENVS, jnp.int32),
        jnp.zeros(NUM_ENVS, jnp.float32),
        jnp.zeros((NUM_ENVS, HIDDEN)),
    )
    return carry, key


def make_iteration(env, env_params):
    """The seed's training iteration on `env` (auto-resetting), `iteration(carry, key) ->
    (carry, None)`: a rollout of every environment, the advantages and one epoch of
    minibatch updates."""
    optimiser = _optimiser()
    act = jax.vmap(act_one, in_axes=(None, 0, 0, 0, 0))

    def env_step(carry, key):
        params, timestep, previous_action, previous_reward, h = carry
        logits, value, h = act(params, h, timestep.observation, previous_action, previous_reward)
        action = jax.random.categorical(key, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        next_timestep = jax.vmap(env.step, in_axes=(None, 0, 0))(env_params, timestep, action)
        transition = Transition(
            timestep.observation,
            previous_action,
            previous_reward,
            action,
            log_prob,
            value,
            next_timestep.reward,
            next_timestep.last(),
        )
        return (params, next_timestep, action, next_timestep.reward, h), transition

    def iteration(carry: Carry, key) -> tuple[Carry, None]:
        params, opt_state, timestep, previous_action, previous_reward, h = carry
        rollout_key, shuffle_key = jax.random.split(key)
        start_h = h
        (_, timestep, previous_action, previous_reward, h), batch = jax.lax.scan(
            env_step,
            (params, timestep, previous_action, previous_reward, h),
            jax.random.split(rollout_key, NUM_STEPS),
        )
        _, last_value, _ = act(params, h, timestep.observation, previous_action, previous_reward)

        def backward(carry, t):
            advantage, next_value = carry
            not_done = 1.0 - batch.done[t]
            delta = batch.reward[t] + GAMMA * next_value * not_done - batch.value[t]
            advantage = delta + GAMMA * GAE_LAMBDA * not_done * advantage
            return (advantage, batch.value[t]), advantage

        _, advantage = jax.lax.scan(
            backward, (jnp.zeros(NUM_ENVS), last_value), jnp.arange(NUM_STEPS), reverse=True
        )
        target = advantage + batch.value
        # [envs, steps, ...], the environments shuffled and dealt into minibatches in turn.
        order = jax.random.permutation(shuffle_key, NUM_ENVS)

        def deal(x):
            x = jnp.swapaxes(x, 0, 1)[order]
            return x.reshape(NUM_MINIBATCHES, -1, *x.shape[1:])

        data = jax.tree.map(deal, (batch, advantage, target))
        data = (start_h[order].reshape(NUM_MINIBATCHES, -1, HIDDEN), *data)

        def update(state, minibatch):
            params, opt_state = state
            grads = jax.grad(_loss)(params, *minibatch)
            updates, opt_state = optimiser.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        (params, opt_state), _ = jax.lax.scan(update, (params, opt_state), data)
        return Carry(params, opt_state, timestep, previous_action, previous_reward, h), None

    return iteration


def train(key, embedding: str, env, env_params):
    """The seed's whole run from `key` on `env` (auto-resetting); returns the trained
    parameters."""
    carry, key = initial_carry(key, embedding, env, env_params)
    iteration = make_iteration(env, env_params)
    carry, _ = jax.lax.scan(iteration, carry, jax.random.split(key, ITERATIONS))
    return carry.params


def evaluate(params, key, num_episodes: int, env, env_params):
    """The returns of `num_episodes` episodes of the sampled policy on `env` (not
    resetting), each from a fresh memory and no previous action or reward, and whether
    each was still running at the time limit."""
    reset_key, key = jax.random.split(key)
    timestep = jax.vmap(env.reset, in_axes=(None, 0))(
        env_params, jax.random.split(reset_key, num_episodes)
    )
    act = jax.vmap(act_one, in_axes=(None, 0, 0, 0, 0))

    def step(carry, key):
        timestep, previous_action, previous_reward, h, running, total = carry
        logits, _, h = act(params, h, timestep.observation, previous_action, previous_reward)
        action = jax.random.categorical(key, logits)
        timestep = jax.vmap(env.step, in_axes=(None, 0, 0))(env_params, timestep, action)
        total = total + jnp.where(running, timestep.reward, 0.0)
        running = running & ~timestep.last()
        return (timestep, action, timestep.reward, h, running, total), None

    carry = (
        timestep,
        jnp.zeros(num_episodes, jnp.int32),
        jnp.zeros(num_episodes, jnp.float32),
        jnp.zeros((num_episodes, HIDDEN)),
        jnp.ones(num_episodes, jnp.bool_),
        jnp.zeros(num_episodes, jnp.float32),
    )
    # Every episode ends within the time limit (max_steps), after which it is not counted.
    (*_, running, total), _ = jax.lax.scan(
        step, carry, jax.random.split(key, int(env_params.max_steps))
    )
    return total, running


def _check_conv():
    """`conv2x2` against XLA's convolution, on random grids and kernels."""
    x = jax.random.normal(jax.random.key(0), (3, 7, 7, 2))
    kernel = jax.random.normal(jax.random.key(1), (2, 2, 2, 5))
    expected = jax.lax.conv_general_dilated(
        x, kernel, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    np.testing.assert_allclose(conv2x2(x, kernel), expected, rtol=1e-5, atol=1e-5)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--threshold", type=float)
    parser.add_argument(
        "--embedding", choices=("fan_in_normal", "standard_normal"), default="fan_in_normal"
    )
    parser.add_argument("--json", help="write the records to this JSON file")
    args = parser.parse_args(argv)
    _check_conv()
    # Built outside the jitted functions: xminigrid makes arrays when it is imported.
    env, auto_reset_env, env_params = _environment()
    run = jax.jit(lambda key: train(key, args.embedding, auto_reset_env, env_params))
    score = jax.jit(lambda params, key: evaluate(params, key, args.episodes, env, env_params))
    records = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        started = time.perf_counter()
        params = jax.block_until_ready(run(jax.random.key(seed)))
        seconds = time.perf_counter() - started
        total, running = score(params, jax.random.key(10_000 + seed))
        returns = np.asarray(total, np.float64)
        half = 1.96 * returns.std(ddof=1) / math.sqrt(returns.size)
        record = {
            "seed": seed,
            "train_s": seconds,
            "return_mean": float(returns.mean()),
            "return_low": float(returns.mean() - half),
            "return_high": float(returns.mean() + half),
            "unfinished": int(np.sum(np.asarray(running))),
        }
        records.append(record)
        print(
            f"seed {seed}: return {record['return_mean']:.3f} [{record['return_low']:.3f}, "
            f"{record['return_high']:.3f}] over {args.episodes} episodes after "
            f"{ITERATIONS * NUM_ENVS * NUM_STEPS} steps ({seconds:.0f} s)",
            flush=True,
        )
    if args.threshold is not None:
        reached = sum(r["return_mean"] >= args.threshold for r in records)
        print(f"{reached} of {len(records)} seeds reach a mean return of {args.threshold}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"embedding": args.embedding, "records": records}, file, indent=2)


if __name__ == "__main__":
    main()
