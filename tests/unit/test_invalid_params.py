"""-32602 messages: msgspec's validation errors in the operator's words, leading with the name."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import pytest

from snode.api import errors as E
from snode.api.invalid_params import invalid_params
from snode.api.types import GenerateBlocksParams, GetBlockParams, GetServiceNodesParams, NoParams, SetMockTimeParams


class Named(msgspec.Struct, forbid_unknown_fields=True):
    label: Annotated[str, msgspec.Meta(max_length=8)]
    tags: Annotated[list[str], msgspec.Meta(min_length=1)]


def message(schema: type[msgspec.Struct], params: dict[str, Any]) -> str:
    with pytest.raises(msgspec.ValidationError) as refused:
        msgspec.convert(params, schema)
    err = invalid_params(refused.value, schema)
    assert err.code == E.INVALID_PARAMS
    return err.message


@pytest.mark.parametrize(("schema", "params", "expected"), [
    (GenerateBlocksParams, {"blocks": "2"}, "Invalid params: blocks: must be an integer, not a string"),
    (GenerateBlocksParams, {"blocks": 100_000}, "Invalid params: blocks: must be at most 1000"),
    (GenerateBlocksParams, {"blocks": 0}, "Invalid params: blocks: must be at least 1"),
    (GenerateBlocksParams, {"block": 1}, "Invalid params: unknown parameter 'block' (this method takes: blocks)"),
    (NoParams, {"verbose": True}, "Invalid params: unknown parameter 'verbose' (this method takes none)"),
    (GetBlockParams, {"height": 1.5}, "Invalid params: height: must be an integer or null, not a number"),
    (GetServiceNodesParams, {"service_node_pubkeys": "ab"},
     "Invalid params: service_node_pubkeys: must be an array, not a string"),
    (GetServiceNodesParams, {"service_node_pubkeys": [1]},
     "Invalid params: service_node_pubkeys[0]: must be a string, not an integer"),
    (SetMockTimeParams, {"timestamp": True}, "Invalid params: timestamp: must be an integer, not true/false"),
    (SetMockTimeParams, {}, "Invalid params: missing parameter 'timestamp'"),
    (Named, {"label": "x" * 9, "tags": ["a"]}, "Invalid params: label: must hold at most 8 characters"),
    (Named, {"label": "x", "tags": []}, "Invalid params: tags: must hold at least 1 item"),
])
def test_each_rule_reads_as_the_operator_would_say_it(schema: type[msgspec.Struct], params: dict[str, Any],
                                                      expected: str) -> None:
    assert message(schema, params) == expected


def test_a_pattern_is_named_in_our_words() -> None:
    class Pattern(msgspec.Struct):
        code: Annotated[str, msgspec.Meta(pattern="^[a-f0-9]+$")]

    assert message(Pattern, {"code": "xyz"}) == "Invalid params: code: must match the pattern '^[a-f0-9]+$'"
