"""snode: a service-node blockchain daemon, its wallet and operator tools.

Offers its version; each subpackage's `__all__` says what it offers the others.
"""

__all__ = ["__version__"]

__version__ = "0.2.0"

import os as _os

if _os.environ.get("SNODE_PURE_PYTHON"):  # the sources even where `make compiled` built them
    from snode.common.compiled import prefer_sources as _prefer_sources

    _prefer_sources()
