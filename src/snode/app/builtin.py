"""Genesis documents shipped with the package for the public networks.

Their authority keys belong to the network's launch team; no secret for them is in this
repository. Regtest's genesis is built from the published regtest seeds (snode.params).
"""

from __future__ import annotations

from typing import Final

from snode.core.genesis import GenesisDoc

BUILTIN_GENESIS: Final = {
    "mainnet": GenesisDoc(
        network="mainnet", timestamp=1_767_225_600,
        authorities=["caf1c279cbe76676d30cb2ca779a65c3c37735ebb22266d746f9f4c8003b4391"],
        outputs=[],
    ),
    "testnet": GenesisDoc(
        network="testnet", timestamp=1_767_225_600,
        authorities=["64c6c9de842b191b4959496ec194ab00fe32d40c25b57a7979ab36534fe0d3ef"],
        outputs=[],
    ),
}
