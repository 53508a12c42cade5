"""Small training configurations shared by the trainer tests and their subprocesses."""

import jax

import azx


def tic_tac_toe(num_envs: int = 8, *, search: str = "gumbel", reuse_tree: bool = False):
    env = azx.envs.make("tic_tac_toe")
    net = azx.nets.MLP(env.observation_shape, env.num_actions, width=32, key=jax.random.key(0))
    if search == "gumbel":
        searcher = azx.search.Gumbel(
            8,
            root_policy=azx.search.SequentialHalving(max_num_considered_actions=4),
            reuse_tree=reuse_tree,
        )
    else:
        searcher = azx.search.PUCT(8, reuse_tree=reuse_tree)
    config = azx.alphazero.Config(
        num_envs=num_envs,
        collect_steps=4,
        train_steps=2,
        batch_size=2 * num_envs,
        buffer_capacity=16 * num_envs,
    )
    trainer = azx.alphazero.AlphaZero(env, searcher, config)
    return trainer, trainer.init(net, key=jax.random.key(1))
