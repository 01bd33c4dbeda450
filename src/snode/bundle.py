"""The single-file executables (`make binary`): one frozen program that runs `snoded`,
`snode-wallet` or `snode-cli`, by the name it was started under (as busybox does), so one
PyInstaller build serves all three (dist/snoded, dist/snode-wallet and dist/snode-cli are copies
of it). It also serves the daemon's signature workers, which the daemon starts as
`<its own executable> -m snode.node.verify_worker`.

It sits above every other layer: it only chooses which program's `main` to run.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROGRAMS = ("snoded", "snode-wallet", "snode-cli")


def main() -> None:
    """Run the program this executable is named after."""
    if sys.argv[1:3] == ["-m", "snode.node.verify_worker"]:
        from snode.node import verify_worker

        del sys.argv[1:3]
        verify_worker.main()
        return
    name = Path(sys.argv[0]).name.removesuffix(".exe")
    if name == "snoded":
        from snode.app import daemon

        daemon.main()
    elif name == "snode-wallet":
        from snode.wallet import cli as wallet

        wallet.main()
    elif name == "snode-cli":
        from snode.tools import cli

        cli.main()
    else:
        print(f"{name}: run this file as one of {', '.join(PROGRAMS)} (copy or link it under that "
              "name)", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
