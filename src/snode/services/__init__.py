"""Services that run on the node and the network: chain sync and the service-node duties."""
