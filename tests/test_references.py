"""Every reference resolves inside the repo: a path the code, the README or our own docs name
exists (a glob matches something), and every document the code cites by name is in docs/.

Not checked: released numbered migrations (schema/NNN-*.sql are frozen: a stale comment there
is corrected in a later migration's notes), the reference documents copied into docs/ from
elsewhere (their example paths are other projects'), bench/RESULTS.md (a dated log: the paths
of its day) and tests/fixtures (release 90 as it was)."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("api", "cli", "collector", "core", "schema", "queries", "dashboards", "docs", "tests", "bench", "docker")
PATH = re.compile(r"(?<![\w/.$-])((?:" + "|".join(TOP) + r")/[\w./*{}<>-]*[\w*}>])")
DOCS = {  # how the code cites a document -> the file
    r"measure-reference": "docs/measure-reference.md",
    r"enform-reports": "docs/enform-reports.md",
    r"calibration\.md": "docs/calibration.md",
    r"\bstyle P\d+|\bstyle\.md": "docs/style.md",
    r"grafana-macros": "docs/grafana-macros.md",
    r"peers-lessons": "docs/peers-lessons.md",
}
EXTERNAL_DOCS = {"docs/measure-reference.md", "docs/enform-reports.md", "docs/calibration.md", "docs/style.md",
                 "docs/grafana-macros.md", "docs/peers-lessons.md"}


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if (ROOT / f).is_file()]


def scanned(files: list[str]) -> list[str]:
    return [f for f in files
            if re.search(r"\.(py|sql|md|yaml|yml|toml|sh|json)$|(^|/)(Makefile|Dockerfile|run)$", f)
            and not f.startswith(("tests/fixtures/", "docs/sources/", ".venv/"))
            and not re.fullmatch(r"schema/\d{3}-[^/]*\.sql", f)
            and f not in EXTERNAL_DOCS and f != "bench/RESULTS.md"]


def resolves(ref: str, files: list[str]) -> bool:
    ref = ref.rstrip(".")
    if any(c in ref for c in "*{}<>") or "NNN" in ref:
        pattern = re.sub(r"\{[^}]*\}|<[^>]*>|NNN", "*", ref)
        return any(fnmatch.fnmatch(f, pattern) or f.startswith(pattern.split("*")[0]) for f in files)
    return ref in files or any(f.startswith(ref.rstrip("/") + "/") for f in files)


def test_every_path_named_exists() -> None:
    files = tracked()
    missing = []
    for f in scanned(files):
        text = (ROOT / f).read_text(errors="ignore")
        for m in PATH.finditer(text):
            if not resolves(m.group(1), files):
                line = text.count("\n", 0, m.start()) + 1
                missing.append(f"{f}:{line}: {m.group(1)}")
    assert not missing, "paths that name nothing in the repo:\n" + "\n".join(missing)


@pytest.mark.parametrize(("cited", "doc"), sorted(DOCS.items()))
def test_documents_cited_by_name_are_in_docs(cited: str, doc: str) -> None:
    files = tracked()
    citing = [f for f in scanned(files) if re.search(cited, (ROOT / f).read_text(errors="ignore"))]
    if citing:
        assert (ROOT / doc).is_file(), f"{doc} is cited by {citing[:5]} but is not in the repo"
