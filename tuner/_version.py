"""The version, written once (pyproject.toml reads it); a module of its own so that what needs
it (the machine cache's fingerprint) imports no package ``__init__`` that imports it back."""

__version__ = "0.1.0"
