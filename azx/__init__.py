"""azx: AlphaZero, MuZero and PPO in JAX, as small composable Equinox modules.

Subpackages: `azx.envs` (environments), `azx.nets` (networks), `azx.search` (batched
MCTS), `azx.buffer` (episode replay buffer), `azx.alphazero` (the AlphaZero training
step), `azx.muzero` (MuZero: a learned model for the same search), `azx.ppo` (the PPO
training step), `azx.arena` (agents, matches, Elo), `azx.parallel` (data parallelism over
a device mesh for any `azx.AbstractTrainer`), `azx.checkpoint` (orbax checkpoints),
`azx.run` (run directories: `azx.load_run` opens what `azx train` wrote).
"""

from . import (
    alphazero as alphazero,
    arena as arena,
    buffer as buffer,
    checkpoint as checkpoint,
    envs as envs,
    muzero as muzero,
    nets as nets,
    parallel as parallel,
    ppo as ppo,
    presets as presets,
    run as run,
    search as search,
)
from ._trainer import AbstractTrainer as AbstractTrainer, AbstractTrainState as AbstractTrainState
from ._version import __version__ as __version__
from .run import load_run as load_run
