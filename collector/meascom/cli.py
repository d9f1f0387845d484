"""`meascom`: MEASURE's command interpreter on measuredb.

    meascom FILE...            run OBEY files, in order
    meascom -c "COMMANDS"      run commands (several lines allowed)
    meascom                    interactive: the `+` prompt (abbreviations allowed there only)

Options: ``--system \\DEMO`` (default: the only system in the database), ``--api URL``
(send the text to a measuredb API's ``POST URL/meascom`` instead of using the database
directly), ``--token`` (bearer token for --api). Without --api the database is DATABASE_URL
or the embedded server, as for `measuredb`.

Exit status: 0 done; 1 a command was refused (nothing of that text changed); 2 a syntax
error (printed with its line and column) or a setup problem (database, system, file).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from collector.meascom.interpreter import MeascomError, Session
from collector.meascom.parser import continues

PROMPT, MORE = "+", "&"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="meascom", description="MEASCOM, MEASURE's command interpreter, on measuredb.",
        epilog="Exit status: 0 ok, 1 a command refused, 2 syntax error or setup problem.")
    p.add_argument("files", nargs="*", metavar="FILE", help="OBEY files to run, in order")
    p.add_argument("-c", dest="commands", metavar="COMMANDS", help="commands to run")
    p.add_argument("--system", help="system (node) name, e.g. \\DEMO; default: the only one")
    p.add_argument("--api", metavar="URL", help="use a measuredb API (POST URL/meascom)")
    p.add_argument("--token", help="bearer token for --api")
    return p


def _fail(message: str, status: int) -> int:
    print(f"meascom: {message}", file=sys.stderr)
    return status


def _status_of(exc: MeascomError) -> int:
    return 2 if exc.syntax else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.commands is not None and args.files:
        return _fail("give OBEY files or -c, not both", 2)
    if args.api:
        return _via_api(args)
    try:
        from pydantic import ValidationError

        from collector.config import DatabaseSettings, describe_validation_error
        from collector.database import DatabaseError, connect

        try:
            settings = DatabaseSettings()
        except ValidationError as exc:
            return _fail(describe_validation_error(exc, DatabaseSettings), 2)
        url, server = connect(settings.database_url, settings.data_dir, timescaledb=settings.timescaledb)
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
    finally:
        if server:
            server.stop()


def _run(action) -> int:
    try:
        out = action()
    except MeascomError as exc:
        return _fail(str(exc), _status_of(exc))
    if out:
        print(out)
    return 0


def _interactive(session: Session) -> int:
    history = None
    try:
        import readline

        history = Path.home() / ".meascom_history"
        try:
            readline.read_history_file(history)
        except OSError:
            pass
    except ImportError:  # pragma: no cover - no readline on this platform
        readline = None  # type: ignore[assignment]
    tty = os.isatty(0)
    if tty:
        print(f"MEASCOM on {session.system_name} ({session.tz.key}); HELP for commands, "
              "EXIT to leave.")
    try:
        while not session.exited:
            try:
                text = input(PROMPT if tty else "")
                while continues(text):
                    text += "\n" + input(MORE if tty else "")
            except EOFError:
                break
            except KeyboardInterrupt:
                print()
                continue
            if not text.strip():
                continue
            try:
                out = session.execute(text)
            except MeascomError as exc:
                print(f"meascom: {exc}", file=sys.stderr)
                continue
            if out:
                print(out)
    finally:
        if history is not None and readline is not None:
            try:
                readline.write_history_file(history)
            except OSError:
                pass
    return 0


def _via_api(args: argparse.Namespace) -> int:
    """POST the text to URL/meascom: {"text", "system", "interactive"} → {"output"} or text."""
    try:
        import httpx
    except ImportError:
        return _fail("--api needs the httpx package (pip install httpx)", 2)
    if args.commands is not None:
        texts = [("-c", args.commands)]
    elif args.files:
        texts = []
        for f in args.files:
            try:
                texts.append((f, Path(f).read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as exc:
                return _fail(f"cannot read OBEY file {f!r}: {exc}", 2)
    else:
        return _fail("--api runs OBEY files or -c commands; the interactive prompt needs the "
                     "database", 2)
    endpoint = args.api.rstrip("/") + "/meascom"
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    for name, text in texts:
        try:
            r = httpx.post(endpoint, json={"text": text, "system": args.system,
                                           "interactive": False}, headers=headers, timeout=120)
        except httpx.HTTPError as exc:
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
            print(out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
