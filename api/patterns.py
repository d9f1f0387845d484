"""The forms the API's text parameters and fields must have, each with its words: a request
that breaks one is answered "system: 'no such!' is not a system name: …", never with the
regular expression (api/errors.py). Every pattern of the OpenAPI document is one of these
(tests/api/test_contract.py)."""

from __future__ import annotations

WORDS: dict[str, str] = {}


def worded(pattern: str, words: str) -> str:
    """The pattern, its words registered for the API's 422 answers."""
    WORDS[pattern] = words
    return pattern


SYSTEM = worded(r"^\\?[A-Za-z][A-Za-z0-9]{0,6}$",
                "a system name: a letter and up to 6 letters or digits, \\ in front optional (\\DEMO)")
MEASUREMENT = worded(r"^[A-Za-z][A-Za-z0-9]{0,7}$",
                     "a measurement (data file) name: a letter and up to 7 letters or digits (CPLNDAY1)")
DESCRIPTOR = worded(r"^[^:\x00]*[^:\s\x00][^:\x00]*:[^\x00]*$",
                    "a descriptor field and its value, field:value (cpu:3, process_name:$DB1)")
COUNTER_NAME = worded(r"^[A-Za-z][A-Za-z0-9_-]{0,15}$",
                      "a user counter name: a letter and up to 15 letters, digits, _ or - (REQUESTS)")
PROCESS_NAME = worded(r"^\$[A-Za-z][A-Za-z0-9]{0,4}$",
                      "a process name: $, a letter and up to 4 letters or digits ($S1)")
PROGRAM_FILE = worded(r"^\$[A-Za-z][A-Za-z0-9]{0,6}\.[A-Za-z][A-Za-z0-9]{0,7}\.[A-Za-z][A-Za-z0-9]{0,7}$",
                      "a file name $VOLUME.SUBVOL.FILE ($APPL.ET1.SERVER)")
DAY = worded(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "a date, YYYY-MM-DD (2026-11-17)")
PAGE_CURSOR = worded(r"^[0-9]{1,10}$", "a cursor: the next_cursor of the previous page")
RUN_CURSOR = worded(r"^[0-9]{1,18}$", "a cursor: the next_cursor of the previous page")
THRESHOLD_SOURCE = worded(r"^(system|default|default \(replaced( in shifts? [0-9, ]+)?\))$",
                          "system, default, or default (replaced in shift N)")
