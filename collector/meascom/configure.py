"""MEASCOM's configuration commands (VOLUME, ADD/DELETE entity, ADD/DELETE COUNTER) applied to
a CONTAB being built (collector/measure/contab.py's ContabBuilder): what the interpreter does
for them, and what POST /measurements does with MEASCOM text."""

from __future__ import annotations

from collections.abc import Iterable

from collector.meascom import ast
from collector.measure.contab import ContabBuilder, clean_message

__all__ = ["CONFIG_COMMANDS", "ContabCommandError", "apply_commands"]

CONFIG_COMMANDS = (ast.Volume, ast.AddEntity, ast.DeleteEntity, ast.AddCounter, ast.DeleteCounter)


class ContabCommandError(ValueError):
    """A MEASCOM command could not be applied to the configuration (line/column 1-based)."""

    def __init__(self, line: int, column: int, message: str):
        super().__init__(f"line {line}, column {column}: {message}")
        self.line, self.column, self.message = line, column, message


def apply_commands(builder: ContabBuilder, commands: Iterable[ast.Command]) -> ContabBuilder:
    """Apply parsed MEASCOM commands to ``builder``; other commands are ignored (the
    interpreter's job). All or nothing: on an error the builder is left unchanged and
    :class:`ContabCommandError` names the command's line and column."""
    saved = (list(builder.descriptors), list(builder.counters), builder.default_subvol)
    cmd = None
    try:
        for cmd in commands:
            _apply_one(builder, cmd)
    except ValueError as exc:
        builder.descriptors, builder.counters, builder.default_subvol = saved
        raise ContabCommandError(getattr(cmd, "line", 0), getattr(cmd, "column", 0),
                                 clean_message(exc)) from None
    return builder


def _apply_one(b: ContabBuilder, cmd: ast.Command) -> None:
    if isinstance(cmd, ast.Volume):
        vol, _, sub = b.default_subvol.partition(".")
        b.default_subvol = f"{cmd.volume or vol}.{cmd.subvol or sub}".upper()
    elif isinstance(cmd, ast.AddEntity):
        for s in cmd.specs:
            b.add_spec(s)
    elif isinstance(cmd, ast.DeleteEntity):
        for s in cmd.specs:
            b.delete_spec(s)
    elif isinstance(cmd, ast.AddCounter):
        b.add_counter(cmd.name, cmd.process.fields, cmd.type, cmd.array)
    elif isinstance(cmd, ast.DeleteCounter):
        b.delete_counter(cmd.name, cmd.process.fields if cmd.process else None)
