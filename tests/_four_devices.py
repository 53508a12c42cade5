"""Training on a 4-device CPU mesh, checked in subprocesses (XLA fixes its device count
when JAX starts): `run_script` launches one of the tests' `_*_run.py` scripts so, and
`train_on_one_and_four` is the run those scripts compare."""

import os
import pathlib
import subprocess
import sys

import equinox as eqx
import jax

import azx


HERE = pathlib.Path(__file__).parent


def run_script(script: str, *args: str) -> str:
    """Runs `tests/{script} {args}` on four CPU devices, with this checkout's azx first
    whatever the subprocess's working directory; its standard output, once it has exited
    cleanly."""
    path = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", PYTHONPATH=path)
    result = subprocess.run(
        [sys.executable, str(HERE / script), *args],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def train_on_one_and_four(trainer, state, keys):
    """`trainer`'s steps from `state`, one per key, on one device and sharded over a mesh
    of all four: the two states they end in."""
    assert len(jax.devices()) == 4, jax.devices()
    single = state
    for key in keys:
        single = eqx.filter_jit(trainer.step)(single, key)
    mesh = azx.parallel.make_mesh()
    sharded = azx.parallel.shard_state(state, mesh)
    for leaf in jax.tree.leaves(eqx.filter(sharded, eqx.is_array)):
        assert len(leaf.sharding.device_set) == 4, leaf.sharding
    step = eqx.filter_jit(azx.parallel.sharded_step(trainer, mesh))
    for key in keys:
        sharded = step(sharded, key)
    return single, sharded
