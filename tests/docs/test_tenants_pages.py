"""The pages for a platform of many tenants, each its own route (docs/alerting/index.md "Many routes: a
platform of tenants", docs/deploy.md "Many routes"): the rule file they show loads and gives each kind of
tenant the rule the page says, and what the pages quote of a run or of the code is what they print.
(docs/examples/alert_tenants.py itself runs in test_examples.py, its output against alert_tenants.out.)"""

from __future__ import annotations

import re

from pages import DOCS

from tracescore.alert import load_alert_config
from tracescore.emit import SERIES_LIMIT

ALERTING = (DOCS / "alerting" / "index.md").read_text(encoding="utf-8")
DEPLOY = (DOCS / "deploy.md").read_text(encoding="utf-8")
EXAMPLES = DOCS / "examples"


def test_the_tenants_file_keeps_a_fixed_no_data_for_the_busiest_and_reads_a_day_for_the_rest() -> None:
    config = load_alert_config(EXAMPLES / "alert_tenants.yaml")
    busy = config.rule_for("rag-platform", "/tenant/000", "faithfulness")
    quiet = config.rule_for("rag-platform", "/tenant/150", "faithfulness")
    assert busy is not None and quiet is not None
    assert (busy.no_data_mode, busy.no_data_seconds) == ("fixed", 900)
    assert (busy.require_calibration, busy.drop is not None) == (True, True)
    assert (quiet.no_data_mode, quiet.window_seconds, quiet.warning) == ("unusual", 86400, 0.7)
    assert not quiet.require_calibration and quiet.drop is None
    assert '--8<-- "docs/examples/alert_tenants.yaml"' in ALERTING
    assert '--8<-- "docs/examples/alert_tenants.out"' in ALERTING


def test_the_alerting_page_says_what_the_day_of_tenants_printed() -> None:
    printed = (EXAMPLES / "alert_tenants.out").read_text(encoding="utf-8")
    default, fixed, with_file = re.findall(r"^(.+): (\d+) notifications$", printed, re.M)
    assert default[0] == "the default rule (no config)" and with_file[1] == "1"
    assert f"The default rule sent {int(default[1]):,} notifications on a healthy day" in ALERTING
    assert fixed[0] == "the default rule with no_data_seconds: 1800 (fixed)"
    assert f"fixed no-data rule it sent {int(fixed[1]):,}, every one a route going quiet" in ALERTING
    (paged,) = re.findall(
        r"^ {4}(\d\d:\d\d) \[FIRING\] faithfulness of rag-platform /tenant/150", printed, re.M
    )
    assert f"the broken tenant's, at {paged} for\nanswers broken since 6:00" in ALERTING


def test_the_deploy_page_gives_the_series_limit_and_the_line_the_consumer_logs_past_it() -> None:
    assert f"at most **{SERIES_LIMIT:,} series per instrument in a process**" in DEPLOY
    assert (
        f"`metric tracescore.estimate.sums: more than\n{SERIES_LIMIT} series (the limit per instrument in a "
        "process, --metrics-max-series)" in DEPLOY
    )
