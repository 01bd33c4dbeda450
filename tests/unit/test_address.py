"""Wallet addresses (core/address.py): round trip, and a decoding error that says what is wrong."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snode.core.address import ALPHABET, DATA_CHARS, SEPARATOR, decode_address, encode_address
from snode.core.errors import InvalidAddress
from snode.devchain import key_from_label
from snode.params import NETWORKS

KEY = key_from_label("alice").public
ADDRESS = encode_address("snr", KEY)


@given(st.binary(min_size=32, max_size=32), st.sampled_from(sorted(NETWORKS)))
def test_round_trip_on_every_network(public, network):
    prefix = NETWORKS[network].address_prefix
    text = encode_address(prefix, public)
    assert text.startswith(prefix + "1")
    assert len(text) == len(prefix) + 1 + DATA_CHARS
    assert decode_address(prefix, text) == public


@pytest.mark.parametrize("other", ["sn", "snt", "snd"])
def test_address_of_another_network_names_the_prefix(other):
    text = encode_address(other, KEY)
    with pytest.raises(InvalidAddress, match="wrong network prefix: .* begin with 'snr1'"):
        decode_address("snr", text)


def test_address_on_a_network_whose_prefix_it_extends_is_refused():
    with pytest.raises(InvalidAddress, match="wrong network prefix"):
        decode_address("sn", ADDRESS)


@pytest.mark.parametrize(
    "text", [" " + ADDRESS, ADDRESS + "\n", ADDRESS[:10] + " " + ADDRESS[10:], ADDRESS + "\t"]
)
def test_whitespace_is_named(text):
    with pytest.raises(InvalidAddress, match="contains whitespace"):
        decode_address("snr", text)


def test_empty_address_is_named():
    with pytest.raises(InvalidAddress, match="address is empty"):
        decode_address("snr", "")


@pytest.mark.parametrize("position", [4, 20, len(ADDRESS) - 1])
def test_single_typo_fails_the_checksum(position):
    typo = ALPHABET[(ALPHABET.index(ADDRESS[position]) + 1) % 32]
    text = ADDRESS[:position] + typo + ADDRESS[position + 1:]
    with pytest.raises(InvalidAddress, match="bad checksum"):
        decode_address("snr", text)


def test_swapped_characters_fail_the_checksum():
    i = next(i for i in range(4, len(ADDRESS) - 1) if ADDRESS[i] != ADDRESS[i + 1])
    text = ADDRESS[:i] + ADDRESS[i + 1] + ADDRESS[i] + ADDRESS[i + 2:]
    with pytest.raises(InvalidAddress, match="bad checksum"):
        decode_address("snr", text)


@pytest.mark.parametrize("text", [ADDRESS[:-1], ADDRESS + "q", ADDRESS[:20], "snr1"])
def test_wrong_length_is_named(text):
    rule = rf"wrong length: {len(text)} characters instead of {len(ADDRESS)}"
    with pytest.raises(InvalidAddress, match=rule):
        decode_address("snr", text)


@pytest.mark.parametrize("bad", ["b", "i", "o", "1", "!", "é", "É"])
def test_characters_outside_the_alphabet_are_named(bad):
    text = ADDRESS[:10] + bad + ADDRESS[11:]
    with pytest.raises(InvalidAddress, match="characters that are not in an address"):
        decode_address("snr", text)


def test_no_network_prefix_contains_the_separator():
    # decode_address relies on it to tell the prefix from the data.
    assert all(SEPARATOR not in p.address_prefix for p in NETWORKS.values())


@pytest.mark.parametrize("text", [ADDRESS.upper(), "SNR1" + ADDRESS[4:], ADDRESS[:10] + ADDRESS[10:].upper()])
def test_upper_case_is_named_not_the_prefix(text):
    # The alphabet is lower case by design (not bech32, whose checksum ignores case): an upper-case
    # address is refused for its case, with the address in the form it must take when that decodes.
    rule = (f"address '{text[:12]}...' has upper-case letters: addresses are all lower case "
            f"(as in '{ADDRESS[:12]}...')")
    with pytest.raises(InvalidAddress) as refused:
        decode_address("snr", text)
    assert str(refused.value) == rule


def test_upper_case_address_of_another_network_names_the_prefix():
    text = encode_address("snt", KEY).upper()
    rule = (f"address '{text[:12]}...' has upper-case letters: addresses are all lower case; in lower "
            f"case: address '{text[:12].lower()}...' has the wrong network prefix: addresses on this network "
            "begin with 'snr1'")
    with pytest.raises(InvalidAddress) as refused:
        decode_address("snr", text)
    assert str(refused.value) == rule
