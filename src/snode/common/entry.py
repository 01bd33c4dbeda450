"""How every snode command ends: a usage or start-up error is one line `<prog>: <reason>` on
stderr and exit code 1; nothing an operator types ends in a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from snode.common.usage_words import usage_words


def run_command(
    command: click.Command, prog: str, argv: list[str] | None, *,
    errors: tuple[type[Exception], ...] = (), interrupt_code: int = 1,
) -> NoReturn:
    """Run a click command; `errors` are the command's own expected failures (shown by their
    message); Ctrl-C exits with `interrupt_code`."""
    try:
        command.main(args=argv, prog_name=prog, standalone_mode=False)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except click.exceptions.NoArgsIsHelpError as err:
        click.echo(err.format_message(), err=True)
    except click.ClickException as err:
        click.echo(f"{prog}: {usage_words(err)}", err=True)
    except errors as err:
        click.echo(f"{prog}: {err}", err=True)
    except click.Abort:
        pass
    except KeyboardInterrupt:
        sys.exit(interrupt_code)
    else:
        sys.exit(0)
    sys.exit(1)
