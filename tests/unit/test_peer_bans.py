"""Scores and bans per address (a review of issue #22's defences, findings 2, 3 and 7): one
address's score survives its reconnects and decays; an IPv6 /64 is one address; both tables
stay bounded whatever number of addresses an attacker has.
(tests/functional/test_hostile_peers.py runs the reconnect against a real daemon.)"""

from __future__ import annotations

from snode.net import limits as L
from snode.net.addrman import network_group
from snode.net.bans import Bans, Scores, address_key


def test_an_ipv6_64_is_one_address_and_ipv4_mapped_is_its_ipv4() -> None:
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff:1:2:3") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:8.8.8.8") == address_key("8.8.8.8") == "8.8.8.8"
    assert address_key("8.8.8.9") != address_key("8.8.8.8")
    assert address_key("not an address") == "not an address"


def test_ipv4_mapped_addresses_are_grouped_as_ipv4() -> None:
    assert network_group("::ffff:8.8.8.8") == network_group("8.8.1.1") == "8.8"
    assert network_group("::ffff:9.9.9.9") != network_group("::ffff:8.8.8.8")
    assert network_group("::ffff:127.0.0.1") == network_group("127.0.0.1")


def test_a_score_is_kept_per_address_and_decays() -> None:
    scores = Scores()
    assert scores.add("8.8.8.8", 90, now=0.0) == 90
    assert scores.add("8.8.8.8", 10, now=0.0) == 100, "a second connection starts from the first one's score"
    assert scores.get("8.8.4.4", now=0.0) == 0
    hour = L.BAN_THRESHOLD / L.SCORE_DECAY
    assert abs(scores.get("8.8.8.8", now=hour / 2) - 50) < 1e-6
    assert scores.get("8.8.8.8", now=hour) == 0
    scores.add("8.8.4.4", 1, now=hour + 1)
    assert len(scores) == 1, "an expired score stays in the table"


def test_the_score_table_is_bounded_and_keeps_the_highest() -> None:
    scores = Scores()
    scores.add("6.6.6.6", 99, now=0.0)
    for i in range(L.MAX_SCORED + 500):
        scores.add(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", 1 + i % 3, now=0.0)
    assert len(scores) <= L.MAX_SCORED
    assert scores.get("6.6.6.6", now=0.0) == 99, "fresh addresses pushed out the score about to ban"
    assert len(scores._heap) <= 2 * L.MAX_SCORED + 64


def test_bans_expire_are_purged_and_bounded() -> None:
    bans = Bans(seconds=600)
    bans.ban("2001:db8:1:2::/64", "junk", now=0.0)
    assert bans.banned(address_key("2001:db8:1:2::99"), now=599.0)
    assert not bans.banned("2001:db8:1:2::/64", now=600.0)
    for i in range(100):
        bans.ban(f"10.0.0.{i}", "junk", now=float(i))
    bans.ban("10.0.1.1", "junk", now=700.0)
    assert len(bans) == 1, "expired bans stay in the table"
    for i in range(L.MAX_BANS + 10):
        bans.ban(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", "junk", now=800.0)
    assert len(bans) == L.MAX_BANS
    assert not bans.banned("10.0.0.0", now=800.0), "the oldest ban should make room"
    assert [left for _, left, _ in bans.items(now=900.0)][:1] == [500.0]
