"""The package's version, in a module of its own that imports nothing: pyproject.toml reads it,
and so do `--version` and the client's user agent, without the package's public names."""

__version__ = "0.1.0"
