"""A live `azx explore` server for the tests: uvicorn on a free port of 127.0.0.1, in a
thread of the test process, and a JSON client for it that sends paths exactly as given."""

import http.client
import json
import socket
import threading
import time
from contextlib import contextmanager

import pytest

import azx
from azx import presets
from azx._rundir import CHECKPOINT_DIR, CONFIG_FILE, run_config, write_json
from azx.explore import Explorer, load_explored, make_app


# The explorer's extra (azx[explore], in dev): without it, its tests are skipped.
pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")


@contextmanager
def explorer_server(directories, replays=()):
    """Serve the runs in `directories` (and the records `replays`); yields
    `(explorer, port)`."""
    explorer = Explorer(load_explored(list(directories)), list(replays))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(make_app(explorer), log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield explorer, sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def request(port, method, path, body=None, *, raw=None):
    """`(status, decoded JSON or text)` of one request; `raw` sends those bytes as the body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        headers = {} if data is None else {"Content-Type": "application/json"}
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(text) if kind.startswith("application/json") else text
    finally:
        connection.close()


def position(run, seed, actions):
    """The batched state after `actions` from `seed`, as the page and `azx play` make it,
    and the key of the next move (what the agent searches it with)."""
    import jax
    import jax.numpy as jnp

    env = run.env
    init_key, game_key = jax.random.split(jax.random.key(seed))
    state = jax.vmap(env.init)(init_key[None])
    for move, action in enumerate(actions):
        key = jax.random.fold_in(game_key, move)
        state = jax.vmap(env.step)(
            state, jnp.asarray([action], jnp.int32), jax.random.split(key, 1)
        )
    return state, jax.random.fold_in(game_key, len(actions))


SMALL = [
    "num_envs=2", "buffer_capacity=64", "batch_size=4", "search.num_simulations=4",
    "network_options.width=16", "network_options.depth=1",
]  # fmt: skip


def untrained_run(out, name: str, settings=()):
    """The run directory `azx train` would start from for preset `name` (`pgx:GAME`:
    the generic setup) with small sizes (and `settings`): its config.json and checkpoint
    0."""
    if name.startswith("pgx:"):
        preset = presets.for_pgx_game(name.removeprefix("pgx:"))
    else:
        preset = presets.get(name)
    preset = preset.changed(settings=[*SMALL, *settings])
    _, state = preset.build(seed=0)
    out.mkdir(parents=True)
    write_json(out / CONFIG_FILE, run_config(preset, 0))
    checkpoints = azx.checkpoint.Checkpointer(out / CHECKPOINT_DIR)
    try:
        checkpoints.save(state, step=0)
    finally:
        checkpoints.close()
    return out
