"""The node: the one owner of the current chain state, the mempool and the event hub; the signature verifiers."""
