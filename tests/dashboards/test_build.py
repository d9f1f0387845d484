"""dashboards/build.py is the source of dashboards/*.json and the alert rules: a fresh run must
write exactly the files that are checked in (P14: regenerate and diff). No database."""

from __future__ import annotations

import difflib
import importlib.util

import yaml

from tests.dashboards.panels import DASHBOARDS


def _build():
    spec = importlib.util.spec_from_file_location("dashboards_build", DASHBOARDS / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_files_are_up_to_date() -> None:
    for path, text in _build().render().items():
        assert path.exists(), f"{path} missing: run .venv/bin/python dashboards/build.py"
        current = path.read_text(encoding="utf-8")
        if current != text:
            diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                str(path), "build.py output", n=1))
            raise AssertionError(f"{path} differs from dashboards/build.py output; run it:\n{diff[:3000]}")


def test_no_stray_dashboards() -> None:
    built = {p.name for p in _build().render() if p.suffix == ".json"}
    assert {p.name for p in DASHBOARDS.glob("*.json")} == built


def test_alerting_file_is_grafana_provisioning() -> None:
    data = yaml.safe_load((DASHBOARDS / "provisioning" / "alerting" / "measuredb.yaml").read_text())
    assert data["apiVersion"] == 1
    assert data["contactPoints"][0]["receivers"][0]["settings"]["url"].startswith("http://127.0.0.1")
    assert data["policies"][0]["receiver"] == data["contactPoints"][0]["name"]


def test_threshold_colours_follow_the_default_thresholds() -> None:
    build = _build()
    defaults = {(e, i): v for e, i, _, v, _ in build.default_thresholds()}
    assert defaults[("cpu", "busy_max")] == 70 and len(defaults) == 12
    # (below the health verdict's row)
    (table,) = [p for p in build.threshold_dashboard()["panels"] if p["title"] == "Threshold report (Figure 1)"]
    steps = {o["matcher"]["options"]: o["properties"][0]["value"]["steps"][1]["value"]
             for o in table["fieldConfig"]["overrides"] if o["properties"][0]["id"] == "thresholds"}
    assert steps == {i: v for (e, i), v in defaults.items() if e == "cpu"}
