"""MEASCOM over HTTP: MeascomRun in, MeascomOutputRead out, MeascomErrorRead on failure (P8)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

FIGURE_3 = ("VOLUME $VOL.CPLNWEEK\nADD CPU *\nADD DISC *\nADD LINE *\n"
            "ADD PROCESS SYSTEM-PROCESSES\nADD USERDEF $PROGS.SERVER1.*\n"
            "ADD COUNTER RESP-TIME, PROCESS $PROGS.SERVER1.*, QUEUE\n"
            "ADD COUNTER THROUGHPUT, PROCESS $PROGS.SERVER1.*, ACCUM\n"
            "START MEASUREMENT CPLNDAY1,\nFROM 00:05 FOR 24 HOURS,\nINTERVAL 1 HOURS\n")


class MeascomRun(BaseModel):
    """MEASCOM text, run as one OBEY file: parsed fully first, then all-or-nothing."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"text": FIGURE_3, "system": "\\DEMO", "interactive": False},
        {"text": "INFO CPLNDAY1"}]})

    text: str = Field(max_length=100_000, description="MEASCOM commands (OBEY and OUT are not "
                                                      "available over HTTP: no server files)")
    system: str | None = Field(default=None, max_length=16,
                               description="system name, e.g. \\DEMO; default: the only one")
    interactive: bool = Field(default=False, description="accept abbreviations (the + prompt)")


class MeascomOutputRead(BaseModel):
    output: str = Field(description="what MEASCOM printed",
                        examples=["Measurement CPLNDAY1 (id 7) scheduled on \\DEMO: from …"])


class MeascomErrorRead(BaseModel):
    """A MEASCOM error: 422 a syntax error (nothing ran) or a bad system; 409 a command
    refused (nothing of the text changed). ``detail`` says where and why."""

    error: str = Field(examples=["MeascomSyntaxError"])
    detail: str = Field(examples=["line 3, column 9: 16 is out of range; expected a CPU number 0-15 or *"])
    field: str | None = None
    line: int | None = Field(default=None, description="1-based line of the offending command")
    column: int | None = Field(default=None, description="1-based column")
    word: str | None = Field(default=None, description="the offending word")
    expected: list[str] | None = Field(default=None, description="what would have been accepted")
    file: str | None = None
