"""snode: a service-node blockchain daemon, its wallet and operator tools."""

__version__ = "0.1.0"
