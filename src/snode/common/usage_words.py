"""A command-line mistake in snode's words, whichever click release parsed the line.

click words its usage errors itself and may reword them in any release; what an operator reads
after `snoded --rpc-admin` or `snode-wallet --bogus` must not change with the click a machine
installed. The errors an operator meets most are built here from the exception's fields (the
option's name, the parameter, the close matches); what a failed value conversion says stays the
converter's message (our own ParamTypes' words, or click's for a plain int or choice).
"""

from __future__ import annotations

import click


def _option(param: click.Parameter | None) -> str:
    if param is None:
        return "a parameter"
    if isinstance(param, click.Option) and param.opts:
        return f"'{max(param.opts, key=len)}'"
    return f"'{param.human_readable_name}'"


def usage_words(err: click.ClickException) -> str:
    """The one line an operator reads for a usage error (without the program's name)."""
    if isinstance(err, click.NoSuchOption):
        near = list(err.possibilities or ())  # closest first, as difflib ranks them
        hint = f" Did you mean {' or '.join(repr(p) for p in near[:3])}?" if near else ""
        return f"No such option '{err.option_name}'.{hint}"
    if isinstance(err, click.MissingParameter):
        kind = "option" if isinstance(err.param, click.Option) else "argument"
        return f"Missing {kind} {_option(err.param)}."
    if isinstance(err, click.BadParameter):
        return f"Invalid value for {_option(err.param)}: {err.message}"
    return err.format_message()
