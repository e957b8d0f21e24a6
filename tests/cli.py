"""`chainkeys_cli`: the `chainkeys` command as the tests run it, in this process unless
the process is the subject (see its docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import typer.main
from typer.testing import CliRunner

# What click prints as the program's name in usage lines when run as `python -m chainkeys.cli`.
PROG_NAME = "python -m chainkeys.cli"
# Commands that only ever run in their own process: `serve` binds a port, installs signal
# handlers and runs until stopped.
PROCESS_COMMANDS = frozenset({"serve"})
# Set in a call's environment, these want a process of its own: a PKCS#11 module is loaded
# and initialised once per process, and SoftHSM reads SOFTHSM2_CONF (each test's tokens)
# only then.
PROCESS_VARIABLES = frozenset({"CHAINKEYS_PKCS11_MODULE", "SOFTHSM2_CONF"})


def chainkeys_cli(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 60,
    process: bool = False,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the `chainkeys` command: `env` is added to this process's environment for
    the call only (a None value removes a variable), in `cwd` if given; the answer is
    the subprocess's.

    In this process by default, through typer's CliRunner: a new Python process spends
    ~0.6 s of CPU importing chainkeys before doing anything, and CI is CPU-bound. The
    command sees what a new process would: settings read afresh, the environment, the
    logging set-up, context variables and the warning filters of a fresh interpreter,
    each restored after the call; an uncaught exception exits 1 with its traceback in
    stderr. `timeout` applies only to a process (pytest-timeout covers the rest).

    A real process (`process=True`) when the process is the subject: signals, start-up,
    what reads a real stdin or terminal; and always for `serve`, with a PKCS#11 module
    (PROCESS_VARIABLES), from a thread other than the main one or under a running event
    loop (CliRunner swaps sys.stdout for the whole process; a command runs its own
    event loop)."""
    if process or not _can_run_here(args, env or {}):
        return _in_a_process(args, env, timeout, cwd)
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        return _in_this_process(args, env)


def _can_run_here(args: Sequence[str], env: Mapping[str, str | None]) -> bool:
    command = next((a for a in args if not a.startswith("-")), None)
    if command in PROCESS_COMMANDS or threading.current_thread() is not threading.main_thread():
        return False
    if any({**os.environ, **env}.get(name) for name in PROCESS_VARIABLES):
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def _in_a_process(
    args: Sequence[str], env: Mapping[str, str | None] | None, timeout: float, cwd: Path | None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "chainkeys.cli", *args],
        env={k: v for k, v in full_env.items() if v is not None},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


@cache
def _command() -> Any:
    """The click command `chainkeys` runs (built once: ~0.1 s)."""
    from chainkeys.cli import app

    return typer.main.get_command(app)


def _in_this_process(
    args: Sequence[str], env: Mapping[str, str | None] | None
) -> subprocess.CompletedProcess[str]:
    """typer's CliRunner (typer carries its own click: its runner forces its 80
    columns) around the command built once; its `invoke` would build it per call."""
    code: int = 0
    crash: BaseException | None = None
    with (
        _no_threads_left(args),
        _environment(),
        CliRunner().isolation(env=env) as (out, err, _),
        _logging(),  # before the captured streams close: its handlers write to them
        _fresh_warnings(),
    ):
        try:
            # The command's context variables (the unsealer it sets) stay in the call.
            contextvars.copy_context().run(_command().main, list(args), prog_name=PROG_NAME)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)  # as the interpreter does
        except Exception as exc:
            code, crash = 1, exc
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    if crash is not None:  # as the interpreter prints it
        stderr += "".join(traceback.format_exception(crash))
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "chainkeys.cli", *args], code, stdout, stderr
    )


@contextmanager
def _environment() -> Iterator[None]:
    """The whole environment put back: commands set variables of their own
    (`--data-dir` becomes CHAINKEYS_DATA_DIR for the worker processes)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for name in set(os.environ) - set(saved):
            del os.environ[name]
        for name, value in saved.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


@contextmanager
def _logging() -> Iterator[None]:
    """Every logger's handlers, level and propagation put back, and the handlers the
    command installed (bound to its captured stderr) closed."""
    loggers: list[logging.Logger] = [logging.root] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    saved = {id(lg): (list(lg.handlers), lg.level, lg.propagate, lg.disabled) for lg in loggers}
    before = {id(h) for lg in loggers for h in lg.handlers}
    try:
        yield
    finally:
        now = [logging.root] + [
            lg
            for lg in logging.Logger.manager.loggerDict.values()
            if isinstance(lg, logging.Logger)
        ]
        added = {id(h): h for lg in now for h in lg.handlers if id(h) not in before}
        for lg in now:
            handlers, level, propagate, disabled = saved.get(
                id(lg), ([], logging.NOTSET, True, False)
            )
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate, lg.disabled = propagate, disabled
        for handler in added.values():
            handler.close()


@contextmanager
def _fresh_warnings() -> Iterator[None]:
    """A fresh interpreter's warning filters (pytest's turn every warning into an
    error): what a process would print goes to the command's stderr."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        for category in (
            DeprecationWarning,
            PendingDeprecationWarning,
            ImportWarning,
            ResourceWarning,
        ):
            warnings.simplefilter("ignore", category, append=True)
        yield


@contextmanager
def _no_threads_left(args: Sequence[str]) -> Iterator[None]:
    """A process ends its threads by exiting; here a command must end what it started.
    Only the command's own count: threads started by this thread or by a thread it
    started. A server of the suite's, running in this process on threads of its own, may
    start one meanwhile (its WAL checkpoint, for a write the command asked it over HTTP)."""
    ours = {threading.current_thread()}
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        if threading.current_thread() in ours:
            ours.add(thread)
            started.append(thread)
        start(thread)

    threading.Thread.start = recorded  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    for thread in started:
        thread.join(5)
        assert not thread.is_alive(), f"`chainkeys {' '.join(args)}` left {thread} running"
