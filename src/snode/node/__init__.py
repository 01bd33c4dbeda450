"""The daemon: configuration, the node (owner of the current state), service-node duties."""
