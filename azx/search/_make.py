"""Searches by name and flat options: what presets, saved run configurations and the
command line use."""

from ._abstract import AbstractSearch
from ._gumbel import GumbelRule, SequentialHalving
from ._mctx import MctxGumbel, MctxPUCT
from ._native import PUCT, Gumbel
from ._puct import PUCTRoot, PUCTRule


_SEARCHES = {
    ("puct", "native"): PUCT,
    ("gumbel", "native"): Gumbel,
    ("puct", "mctx"): MctxPUCT,
    ("gumbel", "mctx"): MctxGumbel,
}

#: Each algorithm's parts, and the options that configure them.
_PARTS = {
    "puct": {
        "rule": (PUCTRule, ("c_init", "c_base")),
        "root_policy": (PUCTRoot, ("dirichlet_alpha", "dirichlet_fraction", "temperature")),
    },
    "gumbel": {
        "rule": (
            GumbelRule,
            ("value_scale", "maxvisit_init", "rescale_values", "use_mixed_value", "min_q_range"),
        ),
        "root_policy": (
            SequentialHalving,
            ("max_num_considered_actions", "gumbel_scale", "reorder_rounds", "visit_count_target"),
        ),
    },
}


def make(algo: str, num_simulations: int, *, backend: str = "native", **options) -> AbstractSearch:
    """A search by name, so that switching backend is one argument.

    **Arguments:**

    - `algo`: `"puct"` (AlphaZero) or `"gumbel"` (Gumbel MuZero).
    - `num_simulations`: simulations per search.
    - `backend`: `"native"` ([`azx.search.PUCT`][], [`azx.search.Gumbel`][]) or `"mctx"`
      ([`azx.search.MctxPUCT`][], [`azx.search.MctxGumbel`][]).
    - `**options`: the options of the algorithm's parts, flat (PUCT: `c_init`, `c_base`
      of [`azx.search.PUCTRule`][]; `dirichlet_alpha`, `dirichlet_fraction`,
      `temperature` of [`azx.search.PUCTRoot`][]. Gumbel: those of
      [`azx.search.GumbelRule`][] and [`azx.search.SequentialHalving`][]), and the chosen
      class's own keyword arguments. `capacity`, `reuse_tree` and `store_all_state_leaves`
      exist only natively (mctx rebuilds its tree every search). `chance_nodes` and
      `chance_expectation` exist on both; in a game with chance, `("gumbel", "mctx")`
      needs `chance_nodes=False`, since mctx has no Gumbel variant of its stochastic
      policy.

    **Raises:** `ValueError` for an unknown name or an option the chosen search lacks.
    """
    if algo not in _PARTS:
        raise ValueError(f"algo must be one of 'puct', 'gumbel'; got {algo!r}")
    if (algo, backend) not in _SEARCHES:
        raise ValueError(f"backend must be one of 'native', 'mctx'; got {backend!r}")
    cls = _SEARCHES[algo, backend]
    options = dict(options)
    for field, (part, names) in _PARTS[algo].items():
        given = {name: options.pop(name) for name in names if name in options}
        options[field] = part(**given)
    try:
        return cls(num_simulations, **options)
    except TypeError as error:
        raise ValueError(f"{cls.__name__} does not take these options: {error}") from None
