"""Latency of ``compare_versions`` and ``search_obligations`` over Streamable HTTP, as a client
sees it (issues 26 and 27, "How it is judged": p95 ≤ 50 ms for each).

Connects one real MCP client (the SDK's ``streamable_http_client`` + ``ClientSession``) to a
running ``kb-mcp serve --transport http``, calls each case ``--warmup`` times untimed, then
``--calls`` times one after another, timing each ``call_tool`` round trip (wall clock,
``time.perf_counter``). A case whose answer is an error stops the run. Prints a Markdown
table: p50 / p95 / max in ms, the answer's size, and the 1-minute load average before and
after each case (the machine is shared).

Run: ``python -m benchmarks.register_latency --url http://127.0.0.1:8765/mcp --edition
"Notice to Market 2026-27.pdf" --document "Notice to Market 2025-26.pdf" [--version NAME]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from benchmarks.common import load_average, percentile

TARGET_P95_MS = 50.0  # issues 26 and 27, "How it is judged"


Case = tuple[str, str, dict[str, Any]]  # (label, tool, arguments)


def cases(edition: str, document: str, version: str | None) -> list[Case]:
    """(label, tool, arguments) of each timed case."""
    out = [
        (f"compare_versions({edition!r})", "compare_versions", {"document": edition}),
        (f"search_obligations(party='retailer', document={document!r})", "search_obligations",
         {"party": "retailer", "document": document}),
        ("search_obligations() (no filter)", "search_obligations", {}),
    ]
    if version:
        out.insert(1, (f"compare_versions({version!r})", "compare_versions", {"document": version}))
    return out


async def measure(url: str, plan: list[Case], calls: int, warmup: int) -> list[dict[str, Any]]:
    """Per case: ``label``, ``ms`` (each timed call), ``chars`` (the answer's JSON size),
    ``count`` (structured ``count`` or the summary), ``load`` (1-minute load before, after).

    Raises:
        RuntimeError: a call answered with an error (its text is in the message).
    """
    from mcp import ClientSession  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    rows = []
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for label, tool, arguments in plan:
            for _ in range(warmup):
                await session.call_tool(tool, arguments)
            before = (load_average() or (0.0,))[0]
            timings = []
            for _ in range(calls):
                started = time.perf_counter()
                result = await session.call_tool(tool, arguments)
                timings.append((time.perf_counter() - started) * 1000.0)
                if result.is_error:
                    text = getattr(result.content[0], "text", "") if result.content else ""
                    raise RuntimeError(f"{label}: {text[:300]}")
            structured = result.structured_content or {}
            rows.append({
                "label": label,
                "ms": timings,
                "chars": len(json.dumps(structured))
                + sum(len(getattr(block, "text", "")) for block in result.content),
                "count": structured.get("count", structured.get("summary")),
                "load": (before, (load_average() or (0.0,))[0]),
            })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of ``measure``'s rows."""
    lines = [
        "| call | n | p50 ms | p95 ms | max ms | p95 ≤ 50 ms | answer chars | count / summary "
        "| load 1-min before → after |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |",
    ]
    for row in rows:
        p95 = percentile(row["ms"], 95)
        lines.append(
            f"| `{row['label']}` | {len(row['ms'])} | {percentile(row['ms'], 50):.1f} "
            f"| {p95:.1f} | "
            f"{max(row['ms']):.1f} | {'yes' if p95 <= TARGET_P95_MS else 'no'} | {row['chars']} | "
            f"{row['count']} | {row['load'][0]:.2f} → {row['load'][1]:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Command line: measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8765/mcp")
    parser.add_argument("--edition", required=True, help="a document with a previous edition")
    parser.add_argument("--document", required=True, help="the document the party search reads")
    parser.add_argument("--version", help="a document with a previous version (optional)")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    plan = cases(args.edition, args.document, args.version)
    rows = asyncio.run(measure(args.url, plan, args.calls, args.warmup))
    print(table(rows))


if __name__ == "__main__":
    main()
