"""Asset checks of the market data; each runs after its asset in the sync job, and can be
run alone from the asset's page (it reads the store, and the latest materialisation)."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import dagster as dg

from kb_assets.constants import (
    AER_PERFORMANCE,
    CHECK_AER_TOTALS,
    CHECK_COMPLIANCE_COUNT,
    COMPLIANCE_ACTIONS,
)
from kb_assets.market.assets import ROWS_READ
from kb_assets.resources import StoresResource

#: Mismatches listed in the check's metadata (all are counted).
LISTED_FAILURES = 50


@dg.asset_check(
    name=CHECK_AER_TOTALS,
    asset=AER_PERFORMANCE,
    description=(
        "Every stored <Region> Total of a count equals the sum of its retailers, and every "
        "National Total the sum of the jurisdictions' totals, within rounding (rates and "
        "averages are not sums and are not checked)."
    ),
)
def aer_totals_match_their_parts(stores: StoresResource) -> dg.AssetCheckResult:
    """``Catalog.check_aer_totals`` over the whole table: passes when nothing mismatches.

    Metadata: ``checked`` totals, ``failures`` count and the first ``LISTED_FAILURES``, each
    naming its file, sheet and cell and both numbers.
    """
    result = stores.catalog().check_aer_totals()
    lines = [f.message for f in result.failures[:LISTED_FAILURES]]
    if len(result.failures) > LISTED_FAILURES:
        lines.append(f"... and {len(result.failures) - LISTED_FAILURES} more")
    return dg.AssetCheckResult(
        passed=result.passed,
        metadata={
            "checked": result.checked,
            "failures": len(result.failures),
            "mismatches": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines)),
        },
    )


@dg.asset_check(
    name=CHECK_COMPLIANCE_COUNT,
    asset=COMPLIANCE_ACTIONS,
    description="The table holds exactly as many actions as the last sync read.",
)
def compliance_count_matches_read(
    context: dg.AssetCheckExecutionContext, stores: StoresResource
) -> dg.AssetCheckResult:
    """Compare ``rows_read`` of the latest materialisation with the table's exact count
    (``Catalog.search_compliance``). With no materialisation yet there is nothing to
    compare: the check fails with severity WARN and says so."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey(COMPLIANCE_ACTIONS))
    materialization = event.asset_materialization if event is not None else None
    read_value = materialization.metadata.get(ROWS_READ) if materialization else None
    if read_value is None:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description="compliance_actions has not been synced yet: nothing to compare",
        )
    read = int(read_value.value)
    stored = stores.catalog().search_compliance(limit=1).count
    return dg.AssetCheckResult(
        passed=stored == read,
        metadata={ROWS_READ: read, "rows_stored": stored},
        description=None if stored == read else (
            f"the table holds {stored} actions but the last sync read {read}"
        ),
    )
