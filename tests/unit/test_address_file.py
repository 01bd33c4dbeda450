"""The address book on disk (`net.address_file`, issue #33): a restart keeps every entry worth
keeping with its record and its slot (the book's key is kept); a truncated, damaged, foreign or
oversized file is one WARNING line and a fresh book, never a failed start; the file is written
atomically and bounded by the book's tables."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest

from snode.net import address_file
from snode.net import limits as L
from snode.net.addrman import AddressBook

NOW = 1_800_000_000.0


def filled(count: int = 300) -> AddressBook:
    book = AddressBook(global_only=True, rng=random.Random(1))
    for i in range(count):
        book.add(f"{20 + i % 200}.{i // 200}.{i % 7}.{i % 250 + 1}:9230", f"{30 + i % 50}.1.1.1", NOW)
    return book


def test_a_restart_keeps_every_entry_its_record_and_its_slot(tmp_path: Path) -> None:
    book = filled()
    some = sorted(a for a in (f"{20 + i % 200}.{i // 200}.{i % 7}.{i % 250 + 1}:9230" for i in range(300))
                  if a in book)
    book.attempt(some[0], NOW)
    book.good(some[1], NOW)
    path = tmp_path / address_file.FILE_NAME
    address_file.write(path, address_file.encode(book, NOW))
    again = AddressBook(global_only=True)
    assert address_file.load(path, again, NOW + 60) == len(book)
    for address in some:
        assert again.placement(address) == book.placement(address), address
    assert again.placement(some[1])[0] == "tried"  # type: ignore[index]
    first, second = again.info(some[0]), book.info(some[0])
    assert first is not None and second is not None
    assert (first.attempts, first.last_try) == (second.attempts, second.last_try) == (1, NOW)
    assert not list(tmp_path.glob(".*.tmp")), "the temporary file is renamed, not left"


@pytest.mark.parametrize("damage", ["truncated", "flipped", "foreign", "empty", "oversized", "garbage"])
def test_an_unusable_file_is_one_warning_and_a_fresh_book(damage: str, tmp_path: Path, caplog: Any) -> None:
    path = tmp_path / address_file.FILE_NAME
    data = address_file.encode(filled(), NOW)
    data = {
        "truncated": data[: len(data) // 2],
        "flipped": data[:-1] + bytes([data[-1] ^ 1]),
        "foreign": b"SNPEERS\x09" + data[8:],
        "empty": b"",
        "oversized": address_file.MAGIC + b"\0" * address_file.MAX_FILE_BYTES,
        "garbage": address_file.MAGIC + __import__("hashlib").sha256(b"\xc1").digest() + b"\xc1",
    }[damage]
    path.write_bytes(data)
    caplog.set_level(logging.WARNING)
    book = AddressBook(global_only=True)
    assert address_file.load(path, book, NOW) == 0
    assert len(book) == 0
    lines = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1 and "starting with a fresh one" in lines[0].getMessage(), lines


def test_a_missing_file_is_a_fresh_book_without_a_word(tmp_path: Path, caplog: Any) -> None:
    assert address_file.load(tmp_path / "none", AddressBook(global_only=True), NOW) == 0
    assert not caplog.records


def test_the_file_is_bounded_by_the_tables() -> None:
    most = (L.NEW_BUCKETS + L.TRIED_BUCKETS) * L.ADDRESS_BUCKET_SIZE
    longest = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
    book = AddressBook(global_only=False)
    key, _ = book.records(NOW)
    estimate = len(address_file.MAGIC) + 32 + most * (len(longest) + len("ffff:ffff") + 5 * 9 + 8)
    assert estimate < address_file.MAX_FILE_BYTES, (estimate, address_file.MAX_FILE_BYTES)
    assert len(key) == 16
