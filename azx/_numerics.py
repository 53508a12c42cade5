"""Numerical conventions shared by every part of azx."""

import contextlib

import jax


#: Logit given to illegal actions wherever logits are masked (the search's priors, the
#: policy losses, PPO's categorical policy): finite, so that softmax and its gradients stay
#: NaN-free.
ILLEGAL_LOGIT = -1e9


@contextlib.contextmanager
def third_party_numerics():
    """Trace third-party code (pgx, mctx, optax) under JAX's default numerics.

    Those libraries are written for standard dtype promotion and implicit rank promotion,
    and some of their code fails under the strict modes that careful users (and azx's own
    tests) switch on. azx's own code runs under whatever the user chose.
    """
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield
