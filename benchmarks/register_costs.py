"""What the ``obligations`` and ``changes`` steps cost in a document's build (issues 26 and 27,
"How it is judged": ≤ 5% and ≤ 10% of the build), read from a KB_HOME's Dagster event log.

For every successful whole build (a run with a ``markdown`` step) that materialised
``obligations`` or ``changes``: the partition
(document), each step's seconds as Dagster timed it (``STEP_SUCCESS``: body plus IO manager),
the sum over the run's steps, the run's wall time (start to end), and the two steps' shares
of the sum. Prints a Markdown table.

Run: ``KB_HOME=DIR python -m benchmarks.register_costs``.
"""

from __future__ import annotations

from benchmarks.common import step_durations

#: The steps whose cost the issues bound, with their targets (share of the build).
TARGETS = {"obligations": 0.05, "changes": 0.10}


def run_rows() -> list[dict[str, object]]:
    """One dict per successful whole build with ``obligations`` or ``changes``, oldest first:
    ``run_id``, ``document``, ``steps`` {step: seconds}, ``sum`` and ``wall`` (seconds)."""
    import dagster as dg  # noqa: PLC0415

    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    instance = dagster_instance(Settings())
    rows = []
    succeeded = dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS])
    records = instance.get_run_records(filters=succeeded)
    for record in reversed(records):
        steps = step_durations(instance, record.dagster_run.run_id)
        if "markdown" not in steps or not set(TARGETS) & set(steps):
            continue  # not a whole build (a `kb rebuild` batch)
        rows.append({
            "run_id": record.dagster_run.run_id[:8],
            "document": record.dagster_run.tags.get("dagster/partition", "?"),
            "steps": steps,
            "sum": sum(steps.values()),
            "wall": (record.end_time or 0.0) - (record.start_time or 0.0),
        })
    return rows


def main() -> None:
    """Print the table of ``run_rows``."""
    print("| run | document | steps (s) | sum of steps (s) | run wall (s) | obligations (s) "
          "| share | changes (s) | share |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in run_rows():
        steps = row["steps"]
        cells = []
        for step in TARGETS:
            seconds = steps.get(step)
            share = None if seconds is None else seconds / row["sum"]
            cells += ["—", "—"] if seconds is None else [f"{seconds:.2f}", f"{share:.1%}"]
        timed = ", ".join(f"{step} {seconds:.1f}" for step, seconds in steps.items())
        print(
            f"| {row['run_id']} | {row['document']} | {timed} | {row['sum']:.1f} | "
            f"{row['wall']:.1f} | " + " | ".join(cells) + " |"
        )


if __name__ == "__main__":
    main()
