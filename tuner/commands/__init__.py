"""CLI subcommands: each module has ``register(subparsers)`` and ``run(args) -> int``; the flags
several commands take are defined once in ``_flags``."""
