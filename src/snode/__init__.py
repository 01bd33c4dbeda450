"""snode: a service-node blockchain daemon, its wallet and operator tools.

Offers its version; each subpackage's `__all__` says what it offers the others.
"""

__all__ = ["__version__"]

__version__ = "0.2.0"
