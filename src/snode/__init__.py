"""snode: a service-node blockchain daemon, its wallet and operator tools."""

__version__ = "0.2.0"
