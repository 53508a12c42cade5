"""azx: AlphaZero in JAX, as small composable Equinox modules.

Subpackages: `azx.envs` (environments), `azx.nets` (policy-value networks),
`azx.search` (batched MCTS), `azx.buffer` (episode replay buffer), `azx.alphazero`
(the training step), `azx.arena` (agents, matches, Elo), `azx.parallel` (data
parallelism over a device mesh), `azx.checkpoint` (orbax checkpoints).
"""

from . import (
    alphazero as alphazero,
    arena as arena,
    buffer as buffer,
    checkpoint as checkpoint,
    envs as envs,
    nets as nets,
    parallel as parallel,
    presets as presets,
    search as search,
)


__version__ = "0.1.0"
