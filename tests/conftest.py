"""Test configuration: strict JAX numerics everywhere.

Runtime shape/dtype checking of every azx function and Module (jaxtyping + beartype) is
switched on by `--jaxtyping-packages` in pyproject's pytest addopts; warnings are errors
through pyproject's `filterwarnings`.
"""

import jax


# No silent int->float or bool->int promotion, and no implicit broadcasting between
# arrays of different rank: both hide shape bugs in batched code.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
