"""The composition root: `snoded`'s flags -> Config, the data dir, wiring every layer together,
the lifecycle (start-up, main loop, graceful stop)."""
