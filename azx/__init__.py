"""azx: AlphaZero in JAX, as small composable Equinox modules.

Subpackages: `azx.envs` (environments), `azx.nets` (policy-value networks),
`azx.search` (batched MCTS), `azx.buffer` (episode replay buffer).
"""

from . import buffer as buffer, envs as envs, nets as nets, search as search


__version__ = "0.1.0"
