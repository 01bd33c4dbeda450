"""The interactive wallet: prompt_toolkit prompt with history and command completion.

After `idle_timeout` seconds without input the wallet forgets its key (a pending confirmation
is cancelled) and asks for the password again before the next command. A transaction's
`(Yes/No)` is answered once: Yes (any case) or y sends, anything else cancels (DESIGN.md section 8).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory

from snode.core.errors import SnodeError
from snode.wallet import commands
from snode.wallet.session import Session


class CommandCompleter(Completer):
    """Completes the command name, the first word of a line."""

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        """Command names that start with what was typed so far."""
        text = document.text_before_cursor
        if " " in text.lstrip():
            return
        word = text.lstrip()
        for name in [*commands.COMMANDS, *commands.ALIASES]:
            if name.startswith(word):
                yield Completion(name, start_position=-len(word))


class IdleTimeout(Exception):
    """No input for the idle timeout."""


async def _timed(prompt: PromptSession[str], message: str, idle_timeout: int) -> str:
    """prompt.prompt_async, ended through prompt_toolkit's own exit after idle_timeout seconds.

    Cancelling the prompt's task instead (asyncio.wait_for) can leave its input reader attached,
    and the next prompt then loses keystrokes.
    """
    if not idle_timeout:
        return await prompt.prompt_async(message)
    loop = asyncio.get_running_loop()

    def expire() -> None:
        if prompt.app.is_running:
            prompt.app.exit(exception=IdleTimeout())

    timer = loop.call_later(idle_timeout, expire)

    def typed(_: object) -> None:  # every keystroke is input: the idle time starts again
        nonlocal timer
        timer.cancel()
        timer = loop.call_later(idle_timeout, expire)

    buffer = prompt.default_buffer
    buffer.on_text_changed += typed
    buffer.on_cursor_position_changed += typed
    try:
        return await prompt.prompt_async(message)
    finally:
        buffer.on_text_changed -= typed
        buffer.on_cursor_position_changed -= typed
        timer.cancel()


async def _answer(prompt: PromptSession[str], question: str, idle_timeout: int) -> str | None:
    """The answer to a `(Yes/No)` question; None for Ctrl-C or Ctrl-D. IdleTimeout when no
    answer comes."""
    try:
        return await _timed(prompt, question, idle_timeout)
    except (KeyboardInterrupt, EOFError):
        return None


def _history(session: Session) -> FileHistory:
    path = session.path.with_name(session.path.name + ".history")
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)
    os.close(fd)
    return FileHistory(str(path))


async def _unlock(session: Session, prompt: PromptSession[str]) -> None:
    while session.service is None:
        try:
            password = await prompt.prompt_async("Password to unlock the wallet: ", is_password=True)
        except KeyboardInterrupt:
            continue
        try:
            await asyncio.to_thread(session.open, password)
        except SnodeError as err:
            click.echo(f"Error: {err}")
    click.echo("Wallet unlocked.")


async def run_repl(session: Session, idle_timeout: int) -> None:
    """Read commands until `exit` or Ctrl-D."""
    assert session.service is not None
    lines: PromptSession[str] = PromptSession(
        history=_history(session), completer=CommandCompleter(), complete_while_typing=False,
    )
    questions: PromptSession[str] = PromptSession()
    service = session.service
    click.echo(f"Wallet {service.address} ({session.params.name}), daemon {session.daemon.url}")
    try:
        tip = await asyncio.to_thread(session.daemon.tip)
        click.echo(f"Daemon height: {tip.height}")
    except SnodeError as err:
        click.echo(f"Error: {err}")
    click.echo("Type help for the commands, exit to leave.")
    prompt_text = f"[wallet {service.address[:10]}]: "
    while True:
        if session.service is None:
            try:
                await _unlock(session, questions)
            except EOFError:
                return
        try:
            line = await _timed(lines, prompt_text, idle_timeout)
        except IdleTimeout:
            session.lock()
            click.echo(f"Wallet locked after {idle_timeout} seconds without input.")
            continue
        except KeyboardInterrupt:
            continue
        except EOFError:
            return
        reply = await asyncio.to_thread(commands.run, session.service, line)
        if reply.lines:
            click.echo("\n".join(reply.lines))
        if reply.pending is not None:
            try:
                answer = await _answer(questions, reply.pending.question, idle_timeout)
            except IdleTimeout:
                session.lock()
                click.echo(f"{commands.CANCELLED} Wallet locked after {idle_timeout} seconds without input.")
                continue
            reply = await asyncio.to_thread(commands.confirm, session.service, reply.pending, answer)
            click.echo("\n".join(reply.lines))
        if reply.exit:
            return
