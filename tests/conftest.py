"""Test configuration: strict JAX numerics everywhere.

Runtime shape/dtype checking of every azx function and Module (jaxtyping + beartype) is
switched on by `--jaxtyping-packages` in pyproject's pytest addopts; warnings are errors
through pyproject's `filterwarnings`.
"""

import jax
import pytest
from _cli import train_small_run


# No silent int->float or bool->int promotion, and no implicit broadcasting between
# arrays of different rank: both hide shape bugs in batched code.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A 2-iteration tic_tac_toe run (checkpoints 1 and 2) made by `azx train`, shared by
    the command-line tests (read-only: tests that change a run change a copy)."""
    return train_small_run(tmp_path_factory.mktemp("run") / "ttt")
