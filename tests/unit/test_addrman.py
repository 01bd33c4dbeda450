"""The address book and the dialer (issue #33 items 3 and 6), in the style of Bitcoin Core's
addrman tests: fixed keys and seeds, times as arguments.
(tests/functional/test_dialling.py dials dead and honest addresses from a real daemon.)"""

from __future__ import annotations

import random
from collections import Counter

from snode.net import limits as L
from snode.net.addrman import AddressBook, AddressInfo
from snode.net.dialer import Dialer

KEY = bytes(range(16))
T0 = 1_800_000_000.0


def book(seed: int = 1, *, key: bytes = KEY) -> AddressBook:
    return AddressBook(global_only=True, key=key, rng=random.Random(seed))


def addr(a: int, b: int, c: int = 1, d: int = 1, port: int = 9230) -> str:
    return f"{a}.{b}.{c}.{d}:{port}"


def fail(b: AddressBook, address: str, now: float) -> None:
    """One dial of `address` that did not answer."""
    b.attempt(address, now)


def tried_collision(b: AddressBook, now: float, *, old_success: float) -> tuple[str, str]:
    """Two addresses of one /16 with the same tried slot: the first answered at `old_success`
    and holds the slot, the second answered at `now` and waits for it: (first, second). The
    first must have answered more than TRIED_REPLACEMENT_S ago for the second to wait."""
    for d in range(1, 255):
        address = addr(5, 6, 7, d)
        b.add(address, source_ip="9.9.9.9", now=old_success)
        b.good(address, old_success)
        if (b.placement(address) or ("",))[0] == "new":
            b.good(address, now)
            occupant = b.collision_to_test(now)  # the slot's holder, still untested
            assert occupant is not None and occupant != address
            return occupant, address
    raise AssertionError("no collision among 254 addresses of one /16 (256 tried slots)")


# --- buckets ----------------------------------------------------------------------------------

def test_one_source_group_reaches_a_bounded_number_of_new_buckets() -> None:
    b = book()
    for i in range(20_000):
        b.add(addr(1 + i % 200, i // 200 % 250, i // 50_000), source_ip=f"8.8.{i % 256}.1", now=T0)
    buckets = {b.placement(a) for a in list(b._info)}
    print(f"one /16 of sources, 20,000 addresses: {len(b)} kept in {len(buckets)} buckets")
    assert len(buckets) <= L.NEW_BUCKETS_PER_SOURCE_GROUP
    assert len(b) <= L.NEW_BUCKETS_PER_SOURCE_GROUP * L.ADDRESS_BUCKET_SIZE


def test_one_address_group_spreads_over_many_buckets_from_many_sources() -> None:
    b = book()
    for i in range(2_000):
        b.add(addr(30, 40, i // 250, i % 250 + 1), source_ip=f"{10 + i % 100}.1.1.1", now=T0)
    buckets = {b.placement(a) for a in list(b._info)}
    assert len(buckets) > L.NEW_BUCKETS_PER_SOURCE_GROUP, "many sources should reach many buckets"


def test_one_network_group_reaches_a_bounded_number_of_tried_buckets() -> None:
    b = book()
    for i in range(1_000):  # an attacker's nodes in one /16, each dialled and answering
        address = addr(66, 77, i // 250, i % 250 + 1)
        b.add(address, source_ip=f"{10 + i % 100}.1.1.1", now=T0)
        b.good(address, T0)
    tried = [a for a in list(b._info) if (b.placement(a) or ("",))[0] == "tried"]
    buckets = {b.placement(a) for a in tried}
    print(f"1,000 answering addresses of one /16: {len(tried)} in tried, in {len(buckets)} buckets")
    assert len(buckets) <= L.TRIED_BUCKETS_PER_GROUP
    assert len(tried) <= L.TRIED_BUCKETS_PER_GROUP * L.ADDRESS_BUCKET_SIZE


def test_placement_depends_on_the_secret_key() -> None:
    addresses = [addr(1 + i, 2, 3, 4) for i in range(50)]
    one, other = book(key=KEY), book(key=bytes(16))
    for a in addresses:
        one.add(a, source_ip="8.8.8.8", now=T0)
        other.add(a, source_ip="8.8.8.8", now=T0)
    same = sum(one.placement(a) == other.placement(a) for a in addresses if a in one and a in other)
    assert same < 10, "with another key an attacker's aim would be the same"


def test_a_taken_slot_goes_only_to_replace_a_terrible_entry() -> None:
    b = book()
    first = [addr(1 + i % 200, i // 200) for i in range(3_000)]
    for a in first:
        b.add(a, source_ip="8.8.8.8", now=T0)
    kept = [a for a in first if a in b]
    assert len(kept) < len(first), "3,000 addresses from one source should collide"
    later = [addr(1 + i % 200, 100 + i // 200) for i in range(3_000)]
    for a in later:
        b.add(a, source_ip="8.8.8.8", now=T0 + 1)
    assert all(a in b for a in kept), "a newcomer pushed out an entry that is not terrible"
    for a in kept:  # every entry dialled three times without an answer: terrible
        for n in range(L.ADDRESS_RETRIES):
            fail(b, a, T0 + 10 + n)
    later_now = T0 + 10 + L.ADDRESS_TERRIBLE_GRACE_S + 10
    taken = sum(b.add(a, source_ip="8.8.8.8", now=later_now) for a in later)
    print(f"{len(kept)} entries turned terrible; newcomers took {taken} of their slots")
    assert taken > len(kept) // 2


# --- how many source groups it takes to flush half of the honest entries --------------------

def test_many_source_groups_cannot_flush_the_honest_entries() -> None:
    """Honest entries from 40 sources, then an attacker in ever more /16s (each sending 250
    addresses of distinct /16s) until it holds every slot it can. The old book (64 x 16, first in
    first out) lost them all to about 100 groups; here a slot is never taken from an entry that
    is not terrible, so the attacker only fills the free slots."""
    rng = random.Random(33)
    b = book(seed=33)
    honest = [addr(rng.randrange(1, 224), rng.randrange(256), rng.randrange(256), rng.randrange(1, 255))
              for _ in range(2_000)]
    for i, a in enumerate(honest):
        b.add(a, source_ip=f"{150 + i % 40}.9.1.1", now=T0)
    honest = [a for a in honest if a in b]
    groups, half_at = 0, None
    for step in (25, 50, 100, 200, 400):
        while groups < step:
            for i in range(250):
                b.add(addr(1 + (groups * 250 + i) % 223, (groups * 250 + i) // 223 % 256, 200, 1),
                      source_ip=f"{1 + groups % 223}.{groups // 223 + 100}.1.1", now=T0 + 1)
            groups += 1
        kept = sum(a in b for a in honest)
        print(f"{groups:4} attacker source groups: {kept} of {len(honest)} honest entries kept, "
              f"{len(b) - kept} attacker entries")
        if half_at is None and kept < len(honest) / 2:
            half_at = groups
    print(f"source groups it takes to flush half of the honest entries: "
          f"{half_at if half_at is not None else f'more than {groups} (never: the table is full)'}")
    assert len(b) > 0.9 * L.NEW_BUCKETS * L.ADDRESS_BUCKET_SIZE, "the attacker should have filled the table"
    assert half_at is None or half_at > 1_000


# --- selection, backoff, terrible entries -----------------------------------------------------

def test_select_draws_from_both_tables_at_random() -> None:
    b = book()
    tried = [addr(20 + i, 1) for i in range(8)]
    new = [addr(60 + i, 1) for i in range(8)]
    for a in tried + new:
        b.add(a, source_ip="8.8.8.8", now=T0)
    for a in tried:
        b.good(a, T0)
    draws = Counter(b.select(T0 + 3_600) for _ in range(2_000))
    from_tried = sum(n for a, n in draws.items() if a in tried)
    print(f"2,000 draws: {from_tried} from tried, {2_000 - from_tried} from new; {len(draws)} addresses")
    assert 800 < from_tried < 1_200
    assert set(draws) == set(tried + new), "every entry should be drawn at times"


def test_a_dead_address_backs_off_then_turns_terrible_and_is_never_saved() -> None:
    b = book()
    dead = addr(7, 7)
    b.add(dead, source_ip="8.8.8.8", now=T0)
    now, dials = T0, []
    while now < T0 + 600:
        info = b.info(dead)
        assert info is not None
        if info.next_dial() <= now and not info.terrible(now):
            b.attempt(dead, now)
            dials.append(now - T0)
        now += 1
    print(f"a dead new address over 10 minutes: dialled at {dials} s")
    assert len(dials) <= 7
    assert [b - a for a, b in zip(dials, dials[1:])] == sorted(b - a for a, b in zip(dials, dials[1:]))
    info = b.info(dead)
    assert info is not None and info.terrible(now)
    assert b.select(now) is None and dead not in b.to_save(now)


def test_a_dead_tried_address_backs_off_and_is_kept() -> None:
    b = book()
    dead = addr(7, 7)
    b.add(dead, source_ip="8.8.8.8", now=T0)
    b.good(dead, T0)
    for _ in range(12):
        info = b.info(dead)
        assert info is not None
        b.attempt(dead, max(info.next_dial(), T0 + 1))
    info = b.info(dead)
    assert info is not None and info.next_dial() - info.last_try == L.DIAL_BACKOFF_MAX_S
    assert not info.terrible(info.last_try + 61), "it answered this week: not terrible yet"
    assert info.terrible(T0 + L.ADDRESS_MIN_FAIL_S + 1)
    assert b.to_save(info.last_try + 61) == [dead]


def test_timestamps_in_the_future_or_too_old_are_terrible() -> None:
    b = book()
    a = addr(7, 8)
    b.add(a, source_ip="8.8.8.8", now=T0 + L.ADDRESS_FUTURE_S + 60)
    info = b.info(a)
    assert info is not None and info.terrible(T0) and not info.terrible(T0 + L.ADDRESS_FUTURE_S + 60)
    assert info.terrible(T0 + L.ADDRESS_HORIZON_S + L.ADDRESS_FUTURE_S + 61)


# --- tried collisions -------------------------------------------------------------------------

def table(b: AddressBook, address: str) -> str:
    return (b.placement(address) or ("none",))[0]


def test_a_tried_entry_that_answers_its_test_keeps_its_slot() -> None:
    b = book()
    old, newcomer = tried_collision(b, T0, old_success=T0 - L.TRIED_REPLACEMENT_S - 100)
    assert b.collision_to_test(T0 + 1) == old
    b.attempt(old, T0 + 2)
    b.good(old, T0 + 3)  # the feeler's answer
    assert b.collision_to_test(T0 + 4) is None
    assert (table(b, old), table(b, newcomer)) == ("tried", "new")


def test_a_tried_entry_that_fails_its_test_is_replaced() -> None:
    b = book()
    old, newcomer = tried_collision(b, T0, old_success=T0 - L.TRIED_REPLACEMENT_S - 100)
    assert b.collision_to_test(T0 + 1) == old
    b.attempt(old, T0 + 2)  # no answer
    assert b.collision_to_test(T0 + 10) == old, "given a minute to answer"
    assert b.collision_to_test(T0 + 3 + L.ADDRESS_TERRIBLE_GRACE_S) is None
    assert table(b, newcomer) == "tried"
    assert table(b, old) in ("new", "none"), "the old entry goes back to new (or away)"


def test_an_untested_collision_is_resolved_for_the_newcomer_after_the_test_window() -> None:
    b = book()
    old, newcomer = tried_collision(b, T0, old_success=T0 - L.TRIED_REPLACEMENT_S - 100)
    assert b.collision_to_test(T0 + L.TRIED_TEST_WINDOW_S - 1) == old
    assert b.collision_to_test(T0 + L.TRIED_TEST_WINDOW_S + 1) is None
    assert (table(b, old), table(b, newcomer)) == ("new", "tried")


def test_a_recent_tried_entry_is_never_replaced() -> None:
    b = book()
    old, newcomer = tried_collision(b, T0, old_success=T0 - L.TRIED_REPLACEMENT_S - 100)
    b.good(old, T0 + 1)  # an outbound connection to it, not a test
    assert b.collision_to_test(T0 + L.TRIED_TEST_WINDOW_S + 1) is None, "it answered lately"
    assert (table(b, old), table(b, newcomer)) == ("tried", "new")


# --- the dialer ---------------------------------------------------------------------------------

def test_eight_dead_tried_addresses_do_not_keep_the_dialer_from_an_honest_one() -> None:
    """Issue #33's case: eight dead tried entries were dialled 21 times each in 40 s and an
    honest address learned meanwhile never. Here: a tick every 2 s, as `PeerManager._maintain`."""
    b = book()
    dialer = Dialer(b, rng=random.Random(2))
    dead = [addr(20 + i, 1) for i in range(8)]
    for a in dead:
        b.add(a, source_ip=a.split(":")[0], now=T0 - 3_600)
        b.good(a, T0 - 3_600)
    honest = addr(99, 1)
    dials: Counter[str] = Counter()
    reached_at = None
    for tick in range(20):
        now = T0 + 2 * tick
        if tick == 5:
            b.add(honest, source_ip="8.8.8.8", now=now)
        connected: set[str] = {honest} if reached_at is not None else set()
        for a in dialer.outbound(now, L.MAX_OUTBOUND - len(connected), skip=connected.__contains__, groups=()):
            dials[a] += 1
            if a == honest and reached_at is None:
                reached_at = now - T0 - 10
    print(f"dials in 40 s: {dict(dials)}; honest reached {reached_at} s after it was learned")
    assert reached_at is not None and reached_at <= 4
    assert dials[honest] == 1, "an address connected or in progress must not be dialled again"
    assert max(dials[a] for a in dead) <= 5


def test_the_dialer_skips_busy_addresses_and_crowded_groups() -> None:
    b = book()
    dialer = Dialer(b, rng=random.Random(3))
    same_group = [addr(44, 44, 1, i) for i in range(1, 6)]
    others = [addr(50 + i, 1) for i in range(5)]
    for a in same_group + others:
        b.add(a, source_ip=f"{a.split('.')[0]}.9.9.9", now=T0)
    busy = {others[0]}
    chosen = dialer.outbound(T0, 8, skip=busy.__contains__, groups={"51.1"})
    assert others[0] not in chosen and others[1] not in chosen
    assert sum(a in same_group for a in chosen) == 1, "one outbound peer per network group"
    assert len(chosen) == len(set(chosen)) == 4


def test_one_ip_with_many_ports_is_not_one_group_on_regtest() -> None:
    b = AddressBook(global_only=False, key=KEY, rng=random.Random(6))
    dialer = Dialer(b, rng=random.Random(6))
    local = [f"127.0.0.1:{38090 + i}" for i in range(4)]
    for a in local:
        b.add(a, source_ip="127.0.0.9", now=T0)
    assert sorted(dialer.outbound(T0, 8, skip=lambda a: False, groups={"127.0.0.1"})) == local


def test_a_feeler_tests_a_collision_first_then_new_entries() -> None:
    b = book()
    dialer = Dialer(b, rng=random.Random(4))
    old, waiting = tried_collision(b, T0, old_success=T0 - L.TRIED_REPLACEMENT_S - 100)
    later = T0 + 1
    assert dialer.feeler(later, skip=lambda a: False) == old
    assert dialer.feeler(later + 1, skip=lambda a: False) is None, "one feeler per interval"
    fresh = addr(120, 1)
    b.add(fresh, source_ip="8.8.8.8", now=later)
    b.good(old, later + 2)  # it answered: the collision is over, `waiting` stays in new
    feelers = {dialer.feeler(later + 10 + n * 10 * L.FEELER_INTERVAL_S, skip=lambda a: False) for n in range(8)}
    assert feelers <= {fresh, waiting, None} and fresh in feelers, "feelers go to new entries only"


def test_a_tried_entry_we_are_connected_to_passes_its_test_at_once() -> None:
    b = book()
    dialer = Dialer(b, rng=random.Random(5))
    old, newcomer = tried_collision(b, T0, old_success=T0 - L.TRIED_REPLACEMENT_S - 100)
    assert dialer.feeler(T0 + 1, skip={old}.__contains__, connected={old}) in (newcomer, None)
    assert b.collision_to_test(T0 + L.TRIED_TEST_WINDOW_S + 1) is None
    assert (table(b, old), table(b, newcomer)) == ("tried", "new"), "a live peer lost its tried slot"


def test_saved_addresses_load_as_new_and_bad_ones_are_named() -> None:
    b = book()
    dialer = Dialer(b)
    refused = dialer.load(["8.8.8.8:9230", "not an address", "10.0.0.1:9230", "[2001:db8::1]:9230"], T0)
    assert refused == ["not an address", "10.0.0.1:9230", "[2001:db8::1]:9230"]
    assert (b.placement("8.8.8.8:9230") or ("",))[0] == "new"
    b.good("8.8.8.8:9230", T0)
    b.add("9.9.9.9:9230", source_ip="1.1.1.1", now=T0)
    assert b.to_save(T0) == ["8.8.8.8:9230", "9.9.9.9:9230"], "tried first, as before"


def test_a_small_book_with_nothing_usable_is_looked_through_once_not_drawn_from() -> None:
    """A devnet node connected to every address it knows asks for one each 2 s: one pass over
    its dozen entries, not SELECT_DRAWS draws; one usable entry is still found."""
    b = book()
    addresses = [addr(10 + i, 1) for i in range(12)]
    for address in addresses:
        b.add(address, source_ip="8.8.8.8", now=T0)
    looked: list[str] = []

    def busy(info: AddressInfo) -> bool:
        looked.append(info.address)
        return False

    assert b.select(T0 + 3_600, usable=busy) is None
    assert 0 < len(looked) <= len(b), f"{len(looked)} looks at a book of {len(b)}"
    free = next(a for a in addresses if a in b)
    assert b.select(T0 + 3_600, usable=lambda info: info.address == free) == free
