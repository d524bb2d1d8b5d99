"""The package's version (the same as pyproject.toml's), importable from any layer without the package's root."""

__version__ = "0.1.0"
