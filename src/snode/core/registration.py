"""The registration command: the one line the daemon prints and the wallet takes.

`register_service_node <operator_cut> <addr1> <amount1> [<addr2> <amount2> ...] <expiry> <pubkey>
<signature>`: the cut is a decimal percent, amounts are atomic units, the expiry is Unix seconds,
the key and the signature are hex. The first pair is the operator's.
"""

from __future__ import annotations

from typing import Final

from snode.common.text import fixed_hex
from snode.core.address import decode_address, encode_address
from snode.core.crypto import SigningKey, verify
from snode.core.errors import InvalidAddress, InvalidAmount, InvalidRegistration
from snode.core.transactions import Registration, Reservation, registration_hash
from snode.core.types import PUBKEY_BYTES, SIGNATURE_BYTES
from snode.core.units import format_percent, parse_percent_ppm, whole_number
from snode.params import MAX_CONTRIBUTORS, MAX_OPERATOR_FEE_PPM, NetworkParams

COMMAND: Final = "register_service_node"


def sign_registration(
    key: SigningKey, params: NetworkParams, fee_ppm: int,
    reservations: tuple[Reservation, ...], expiry: int,
) -> Registration:
    """The registration payload, signed by the service node's key."""
    message = registration_hash(params.network_id, fee_ppm, reservations, expiry, key.public)
    return Registration(
        fee_ppm=fee_ppm, reservations=reservations, expiry=expiry, sn_pubkey=key.public,
        sn_signature=key.sign(message),
    )


def format_command(reg: Registration, params: NetworkParams) -> str:
    """The single-line wallet command for a registration."""
    parts = [COMMAND, format_percent(reg.fee_ppm)]
    for r in reg.reservations:
        parts += [encode_address(params.address_prefix, r.owner), str(r.amount)]
    parts += [str(reg.expiry), reg.sn_pubkey.hex(), reg.sn_signature.hex()]
    return " ".join(parts)


def parse_command(line: str, params: NetworkParams) -> Registration:
    """Parse a pasted registration line; InvalidRegistration names what is wrong.

    Checks the form, the addresses' network prefix, the amounts and the signature; the rules
    that need the chain (expiry, balances, an existing registration) are the caller's.
    """
    words = line.strip().split()
    if words and words[0] == COMMAND:
        words = words[1:]
    # cut, >=1 pair, expiry, pubkey, signature
    if len(words) < 6 or (len(words) - 4) % 2:
        raise InvalidRegistration(
            "registration command is malformed: expected <operator_cut> <address> <amount> "
            "[<address> <amount> ...] <expiry> <pubkey> <signature>; paste the whole line from "
            "get_service_node_registration_cmd"
        )
    cut, *pairs_flat, expiry_text, pubkey_hex, sig_hex = words
    try:
        fee_ppm = parse_percent_ppm(cut, maximum_ppm=MAX_OPERATOR_FEE_PPM)
    except InvalidAmount as err:
        raise InvalidRegistration(f"operator cut: {err}") from None
    pairs = list(zip(pairs_flat[0::2], pairs_flat[1::2]))
    if len(pairs) > MAX_CONTRIBUTORS:
        raise InvalidRegistration(
            f"registration names {len(pairs)} contributors; at most {MAX_CONTRIBUTORS} are allowed"
        )
    reservations = []
    for i, (addr, amount) in enumerate(pairs):
        who = "operator" if i == 0 else f"contributor {i}"
        try:
            owner = decode_address(params.address_prefix, addr)
        except InvalidAddress as err:
            raise InvalidRegistration(f"{who} {err}") from None
        value = _whole(amount)
        if value is None:
            raise InvalidRegistration(
                f"{who} amount '{amount[:40]}' is not a whole number of atomic units"
            )
        reservations.append(Reservation(owner, value))
    expiry = _whole(expiry_text)
    if expiry is None:
        raise InvalidRegistration(f"expiry '{expiry_text[:40]}' is not a Unix timestamp")
    pubkey = _hex(pubkey_hex, PUBKEY_BYTES, "service node public key")
    signature = _hex(sig_hex, SIGNATURE_BYTES, "signature")
    reg = Registration(
        fee_ppm=fee_ppm, reservations=tuple(reservations), expiry=expiry,
        sn_pubkey=pubkey, sn_signature=signature,
    )
    message = registration_hash(params.network_id, fee_ppm, reg.reservations, reg.expiry, pubkey)
    if not verify(pubkey, message, signature):
        raise InvalidRegistration(
            "registration signature is not valid: re-generate the command with "
            "get_service_node_registration_cmd and paste it unchanged"
        )
    return reg


def _hex(text: str, size: int, what: str) -> bytes:
    raw = fixed_hex(text, size)
    if raw is None:
        raise InvalidRegistration(f"{what} must be {size * 2} hex characters")
    return raw


def _whole(text: str) -> int | None:
    """A number from 0 to 2**63 - 1 written in digits, or None."""
    value = whole_number(text)
    return value if value is not None and value <= 2**63 - 1 else None
