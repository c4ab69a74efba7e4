"""CLI subcommands: each module has ``register(subparsers)`` and ``run(args) -> int``."""
