"""The package's version, in a module of its own so that modules inside the package read it without the facade."""

__version__ = "0.1.0"
