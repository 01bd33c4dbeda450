"""Command-line mistakes in our words (issue #32): each line is built from click's exception
fields, so a click release that rewords its own messages does not change what an operator reads."""

from __future__ import annotations

import click
import pytest

from snode.common.usage_words import usage_words


@click.command()
@click.option("--rpc-port", type=int, required=True)
@click.option("--rpc-login")
@click.argument("target", required=False)
def command(**_: object) -> None:
    pass


@click.command()
@click.argument("target")
def needs_argument(**_: object) -> None:
    pass


@pytest.mark.parametrize(("cmd", "argv", "words"), [
    (command, ["--bogus"], "No such option '--bogus'."),
    (command, ["--rpc-lgin", "x", "--rpc-port", "1"],
     "No such option '--rpc-lgin'. Did you mean '--rpc-login' or '--rpc-port'?"),
    (command, [], "Missing option '--rpc-port'."),
    (needs_argument, [], "Missing argument 'TARGET'."),
    (command, ["--rpc-port", "x"], "Invalid value for '--rpc-port': 'x' is not a valid integer."),
])
def test_each_mistake_reads_the_same_whatever_click_says(cmd, argv, words):
    with pytest.raises(click.ClickException) as caught:
        cmd.main(args=argv, standalone_mode=False)
    assert usage_words(caught.value) == words
