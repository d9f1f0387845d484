"""`meascom`: MEASURE's command interpreter on measuredb.

    meascom FILE...            run OBEY files, in order
    meascom -c "COMMANDS"      run commands (several lines allowed)
    meascom                    interactive: the `+` prompt (abbreviations allowed there only)

Options: ``--system \\DEMO`` (default: the only system in the database), ``--api URL``
(send the text to a measuredb API's ``POST URL/meascom`` instead of using the database
directly), ``--token`` (bearer token for --api). Without --api the database is DATABASE_URL
or the embedded server, as for `measuredb`.

Exit status (every error is one line on stderr starting with ``meascom:``; one that comes
from input text names the OBEY file, if any, and the line and column):

* 0: done (the interactive prompt: the session ended; errors there were printed and the
  session went on).
* 1: a command was refused by MEASURE semantics (a measurement already live, an unknown
  measurement, nothing to measure …); nothing of that text changed.
* 2: bad input or setup: a syntax error, input that is not text (not UTF-8, NUL
  characters), an OBEY file that cannot be found or read, an OUT file that cannot be
  written, a bad option, or a setup problem (database, system). (Also a bug in meascom:
  ``meascom: internal error (…); please report it``, never a traceback; set
  MEASCOM_TRACEBACK=1 to see one.)
* 2 also: standard output could not be written (a full disc, a device error): ``meascom:
  cannot write the output: No space left on device …``; the texts that ran have committed.
* 141 (128 + SIGPIPE, what a shell shows for ``seq 100000 | head -1``): standard output was
  closed early (``meascom -c HELP | head -1``); meascom stops quietly, printing nothing more.
  Texts that ran before have committed; the one whose output was cut had committed too
  (output follows the commit); later OBEY files and prompt input do not run.
* 130: interrupted (Ctrl-C) while running -c text or OBEY files; the text running then
  changed nothing (earlier OBEY files stay done). At the prompt Ctrl-C only abandons the
  command being typed or run.

Each OBEY file (and the -c text, and each prompt command) runs as one transaction: an error
anywhere in it (including an OUT file that cannot be written) changes nothing of it.
"""

from __future__ import annotations

import argparse
import os
import readline
import sys
import traceback
from pathlib import Path

import httpx
import psycopg
from pydantic import ValidationError

from collector.meascom.interpreter import MeascomError, Session, file_error_reason, read_obey_file
from collector.meascom.parser import continues, printable
from core.database import DatabaseError, check_schema, connect
from core.settings import DatabaseSettings, describe_validation_error

PROMPT, MORE = "+", "&"
EXIT_REFUSED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_PIPE_CLOSED = 1, 2, 130, 141


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line like every other error (argparse: usage too)
        self.exit(EXIT_BAD_INPUT, f"meascom: {printable(message)} (meascom --help for usage)\n")


def _parser() -> argparse.ArgumentParser:
    p = _ArgumentParser(
        prog="meascom", description="MEASCOM, MEASURE's command interpreter, on measuredb.",
        epilog="Exit status: 0 ok, 1 a command refused, 2 bad input (syntax, file) or setup "
               "problem, 141 output closed early, 130 interrupted.")
    p.add_argument("files", nargs="*", metavar="FILE", help="OBEY files to run, in order")
    p.add_argument("-c", dest="commands", metavar="COMMANDS", help="commands to run")
    p.add_argument("--system", help="system (node) name, e.g. \\DEMO; default: the only one")
    p.add_argument("--api", metavar="URL", help="use a measuredb API (POST URL/meascom)")
    p.add_argument("--token", help="bearer token for --api")
    return p


def _fail(message: str, status: int) -> int:
    _error(message)
    return status


def _error(message: str) -> None:
    """One line on stderr (control characters and line ends of the input shown escaped)."""
    if sys.stderr is not None:  # None: started with stderr closed (2>&-); print would use stdout
        print(f"meascom: {printable(message)}", file=sys.stderr)


class _OutputError(Exception):
    """Standard output cannot be written (a full disc, a device error): the user's condition."""

    def __init__(self, exc: OSError) -> None:
        super().__init__(exc.strerror or str(exc))


def _print(text: str) -> None:
    """Output on stdout; characters its encoding lacks (a Latin-1 terminal) come escaped."""
    try:
        try:
            print(text)
        except UnicodeEncodeError:
            enc = getattr(sys.stdout, "encoding", None) or "ascii"
            print(text.encode(enc, "backslashreplace").decode(enc, "replace"))
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _OutputError(exc) from None


def _flush_stdout() -> None:
    if sys.stdout is None:  # started with stdout closed (>&-)
        return
    try:
        sys.stdout.flush()  # a closed pipe or a full disc shows here, not in Python's exit handler
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _OutputError(exc) from None


def _status_of(exc: MeascomError) -> int:
    return EXIT_BAD_INPUT if exc.bad_input else EXIT_REFUSED


def _to_devnull(stream) -> None:
    """Point a closed stream's file descriptor at /dev/null, so Python's final flush at exit
    does not fail again (the recipe of the `signal` module's documentation, "Note on
    SIGPIPE")."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests capture it)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """The `meascom` command; returns its exit status (see the module documentation). No
    exception escapes: errors become one ``meascom: …`` line on stderr."""
    try:
        try:
            status = _main(argv)
        finally:
            _flush_stdout()
        return status
    except BrokenPipeError:
        _to_devnull(sys.stdout)
        _to_devnull(sys.stderr)
        return EXIT_PIPE_CLOSED
    except _OutputError as exc:
        _to_devnull(sys.stdout)
        return _fail_quietly(f"cannot write the output: {exc} (a full disc? check where standard output "
                             "goes); the commands that ran stay done", EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        return _fail_quietly("interrupted", EXIT_INTERRUPTED)
    except SystemExit as exc:  # argparse: --help (0) or a bad option (2, message printed)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    except Exception as exc:  # a bug: one line, not a traceback (MEASCOM_TRACEBACK=1 shows it)
        if os.environ.get("MEASCOM_TRACEBACK"):
            traceback.print_exc()
        return _fail_quietly(f"internal error ({type(exc).__name__}: {exc}); please report it",
                             EXIT_BAD_INPUT)


def _fail_quietly(message: str, status: int) -> int:
    try:
        return _fail(message, status)
    except (OSError, ValueError):  # stderr closed too
        return status


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.commands is not None and args.files:
        return _fail("give OBEY files or -c, not both", 2)
    if args.api:
        return _via_api(args)
    try:
        try:
            settings = DatabaseSettings()
        except ValidationError as exc:
            return _fail(describe_validation_error(exc, DatabaseSettings), 2)
        url, server = connect(settings.database_url, settings.data_dir, timescaledb=settings.timescaledb,
                              create=False)
        try:
            check_schema(url)
        except DatabaseError:
            if server:
                server.stop()
            raise
    except DatabaseError as exc:
        return _fail(str(exc), 2)
    try:
        try:
            session = Session(url, system=args.system, interactive=not (args.files or args.commands))
        except MeascomError as exc:
            return _fail(str(exc), 2)
        with session:
            if args.commands is not None:
                return _run(lambda: session.execute(args.commands, interactive=False))
            for f in args.files:
                status = _run(lambda f=f: session.run_file(f))
                if status or session.exited:
                    return status
            if args.files:
                return 0
            return _interactive(session)
    except psycopg.Error as exc:  # the connection failed or broke (commands run report theirs)
        return _fail(f"database: {_db_message(exc)}", 2)
    finally:
        if server:
            server.stop()


def _db_message(exc: Exception) -> str:
    diag = getattr(exc, "diag", None)
    return (diag.message_primary if diag is not None and diag.message_primary
            else str(exc).strip() or type(exc).__name__)


def _run(action) -> int:
    try:
        out = action()
    except MeascomError as exc:
        return _fail(str(exc), _status_of(exc))
    if out:
        _print(out)
    return 0


def _interactive(session: Session) -> int:
    history = Path.home() / ".meascom_history"
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    try:
        tty = sys.stdin.isatty()
    except (AttributeError, OSError, ValueError):  # closed or not a file
        tty = False
    if tty:
        print(f"MEASCOM on {session.system_name} ({session.tz.key}); HELP for commands, "
              "EXIT to leave.")
    read = _reader(tty)
    try:
        while not session.exited:
            text, at_end = "", False
            try:
                text = read(PROMPT if tty else "")
                while continues(text):
                    text += "\n" + read(MORE if tty else "")
            except EOFError:  # a command continued past the end still runs (or says why not)
                at_end = True
            except KeyboardInterrupt:
                print()
                continue
            except MeascomError as exc:  # a line that is not UTF-8: skipped, with its command
                _error(str(exc))
                continue
            if text.strip():
                try:
                    out = session.execute(text)
                except MeascomError as exc:
                    _error(str(exc))
                    out = ""
                except KeyboardInterrupt:  # back to the prompt; the command changed nothing
                    _error("interrupted; nothing of that command changed")
                    out = ""
                if out:
                    _print(out)
            if at_end:
                break
    finally:
        try:
            readline.write_history_file(history)
        except OSError:
            pass
    return 0


def _reader(tty: bool):
    """``read(prompt)``: the next line of stdin without its end; EOFError at the end. A line
    that is not UTF-8 raises MeascomError (``stdin, line L, column C``). Piped stdin is read
    as bytes (a bad line is skipped exactly); a terminal through input() and readline."""
    buffer = None if tty else getattr(sys.stdin, "buffer", None)
    count = 0

    def not_text(raw: bytes, start: int) -> MeascomError:
        column = len(raw[:start].decode("utf-8", "replace")) + 1
        return MeascomError(f"not UTF-8 text: byte 0x{raw[start]:02X}", count, column,
                            file="stdin", syntax=True)

    def read(prompt: str) -> str:
        nonlocal count
        if sys.stdin is None:  # closed (meascom <&-): nothing to read
            raise EOFError
        if buffer is None:
            count += 1
            try:
                return input(prompt)
            except UnicodeDecodeError as exc:
                raw = exc.object  # (bytes: Python makes it so)
                raise not_text(raw, exc.start) if raw else MeascomError(
                    "not UTF-8 text", count, 1, file="stdin", syntax=True) from None
        raw = buffer.readline()
        if not raw:
            raise EOFError
        count += 1
        raw = raw.removesuffix(b"\n")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise not_text(raw, exc.start) from None

    return read


def _via_api(args: argparse.Namespace) -> int:
    """POST the text to URL/meascom: {"text", "system", "interactive"} → {"output"} or text."""
    if args.commands is not None:
        texts = [("-c", args.commands)]
    elif args.files:
        texts = []
        for f in args.files:
            try:
                texts.append((f, read_obey_file(Path(f), f)))
            except MeascomError as exc:  # not text: positioned in the file
                return _fail(str(exc), 2)
            except (OSError, ValueError) as exc:
                return _fail(f"{f}: cannot read OBEY file: {file_error_reason(exc)}", 2)
    else:
        return _fail("--api runs OBEY files or -c commands; the interactive prompt needs the "
                     "database", 2)
    endpoint = args.api.rstrip("/") + "/meascom"
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    for name, text in texts:
        try:
            r = httpx.post(endpoint, json={"text": text, "system": args.system,
                                           "interactive": False}, headers=headers, timeout=120)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            return _fail(f"cannot reach the API at {args.api}: {exc}", 2)
        if r.status_code in (404, 405):
            return _fail(f"the API at {args.api} has no MEASCOM endpoint (POST /meascom answered "
                         f"{r.status_code}); run meascom without --api to use the database "
                         "directly", 2)
        body: object
        try:
            body = r.json()
        except ValueError:
            body = r.text
        if r.status_code >= 400:
            detail = body.get("detail", body) if isinstance(body, dict) else body
            if isinstance(detail, dict):
                where = f"line {detail.get('line')}, column {detail.get('column')}: " if detail.get(
                    "line") else ""
                detail = where + str(detail.get("message", detail))
            label = "" if name == "-c" else f"{name}: "
            return _fail(f"{label}{detail}", 2 if r.status_code in (400, 422) else 1)
        out = body.get("output", "") if isinstance(body, dict) else str(body)
        if out:
            _print(out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
