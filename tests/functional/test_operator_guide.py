"""docs/OPERATOR.md cannot go stale: its generator (`make docs`) runs the guide's commands on real
regtest daemons and fills every placeholder of docs/OPERATOR.md.in; this runs it into a
temporary file and checks what an operator reads there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.functional.framework import assert_equal, narrator, scaled

log = narrator(__name__)


@pytest.mark.slow
def test_the_operator_guide_is_generated_from_real_output(tmp_path):
    log.info("Run the guide's generator on its own regtest network (it stops its daemons)")
    out = tmp_path / "OPERATOR.md"
    done = subprocess.run([sys.executable, "-m", "snode.tools.operator_guide", str(out)],
                          capture_output=True, text=True, timeout=scaled(240), stdin=subprocess.DEVNULL)
    assert_equal(done.returncode, 0, done.stdout + done.stderr)
    guide = out.read_text()
    assert "{{" not in guide, "every placeholder is filled"
    for expected in ("$ snoded --version", "v0.2.0; Height: 0, SN: not registered, proof: never",
                     "register_service_node ",
                     "Transaction sent. Transaction ID:", '"ready": true', "unlocking at height",
                     "No operator contribution given: operator address: address contains whitespace",
                     "old-server  unreachable: Unable to connect to http://127.0.77.4:38091",
                     "exported to /var/lib/snode/sn-key.json (sealed, mode 0600)",
                     "imported into /var/lib/snode/new-server\nfile: /var/lib/snode/new-server/key\n"
                     "registration: registered at height ", " coins to this wallet."):
        assert expected in guide, expected
    assert "/tmp/snode-guide-" not in guide
