"""The descriptor budget (issue #33, item 1): the soft limit raised at start, the free test at
each accept, one ERROR line while short, and the systemd unit agreeing with the daemon."""

from __future__ import annotations

import logging
import re
import resource
import subprocess
import sys
from pathlib import Path

from snode.common.descriptors import CHECK_INTERVAL, DESCRIPTOR_TARGET, QUIET_INTERVAL, DescriptorWatch, reserve_for

UNIT = Path(__file__).parents[2] / "contrib" / "snoded.service"


def test_the_soft_limit_is_raised_to_the_hard_one_and_logged_once():
    script = ("import logging, resource; logging.basicConfig(level=logging.INFO);"
              "from snode.common.descriptors import raise_soft_limit;"
              "print(raise_soft_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 1024)))
    assert done.stdout.split() == ["1024", "1024"], done
    assert done.stderr.count("file descriptors: soft limit 1024 (hard 1024), 102 kept in reserve") == 1


def test_a_new_descriptor_near_the_limit_is_short_and_says_so_once(caplog):
    watch = DescriptorWatch(1024)
    assert watch.reserve == reserve_for(1024) == 102
    assert not watch.short_of(1024 - 103)
    with caplog.at_level(logging.ERROR):
        assert watch.short_of(1024 - 102)
        assert watch.short_of(1023)
    assert watch.low and "1024 in use" in (watch.shortage() or "")
    assert [r.levelname for r in caplog.records].count("ERROR") == 1, "rate-limited"


def test_the_count_comes_every_second_only_where_a_shortage_is_near():
    watch = DescriptorWatch(1024)
    assert watch.interval() == CHECK_INTERVAL, "not counted yet"
    watch.check()
    assert watch.used is not None and watch.used < 512 and watch.interval() == QUIET_INTERVAL
    watch._report(600)
    assert watch.interval() == CHECK_INTERVAL, "half in use"
    assert watch.short_of(1000) and watch.interval() == CHECK_INTERVAL, "short"
    watch._report(100)
    assert not watch.low and watch.interval() == QUIET_INTERVAL


def test_the_unit_sets_the_limit_the_daemon_would_raise_itself_to():
    """The unit forbids setrlimit (~@resources): the daemon must find its target already set."""
    text = UNIT.read_text()
    assert re.search(r"^SystemCallFilter=~.*@resources", text, re.M)
    assert f"\nLimitNOFILE={DESCRIPTOR_TARGET}\n" in text
