"""The composition root: `snoded`'s flags -> Config, the data dir, wiring every layer together,
the lifecycle (start-up, main loop, graceful stop).

Others use `daemon` only (snoded's entry point, `snode.app.daemon:main`); the rest is its own.
"""

__all__ = [
    "daemon",
]
