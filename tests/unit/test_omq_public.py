"""The public OMQ port's pure parts: a client IP's token bucket and request parsing."""

from __future__ import annotations

import pytest

from snode.rpc.omq_public import BURST, RATE, RequestError, TokenBuckets, parse_request


def test_a_bucket_allows_a_burst_then_its_rate():
    buckets = TokenBuckets()
    assert sum(buckets.take("1.2.3.4", 100.0) for _ in range(100)) == BURST
    assert not buckets.take("1.2.3.4", 100.0)
    assert buckets.take("5.6.7.8", 100.0), "another client has its own bucket"
    assert sum(buckets.take("1.2.3.4", 101.0) for _ in range(100)) == RATE  # one second later


@pytest.mark.parametrize(("frames", "status", "text"), [
    ([], b"400", "got 0 frames"),
    ([b"get_height", b"", b""], b"400", "got 3 frames"),
    ([b"\xff"], b"400", "not UTF-8"),
    ([b"stop_daemon"], b"404", "is not served on the public port"),
    ([b"get_block", b"{"], b"400", "not JSON"),
    ([b"get_block", b"7"], b"400", "must be a JSON object"),
])
def test_bad_requests_say_why(frames, status, text):
    with pytest.raises(RequestError) as caught:
        parse_request(frames)
    assert caught.value.status == status and text in caught.value.message


def test_good_requests():
    assert parse_request([b"get_height"]) == ("get_height", {})
    assert parse_request([b"get_block", b' {"height": 3} ']) == ("get_block", {"height": 3})
