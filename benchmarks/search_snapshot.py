"""Snapshot of what ``search_docs`` answers over HTTP, to prove a speed change changed nothing.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.search_snapshot --home H --out before.jsonl
    .venv/bin/python -m benchmarks.search_snapshot --home H --out after.jsonl --against before.jsonl

Starts ``kb-mcp serve`` on ``--home`` (local providers; the server's base URL in links is
replaced by ``BASE`` so the port does not count), and for every question of each ``--eval`` set (default: the shared
regulatory and FinanceBench sets; questions whose documents the home lacks are asked all the
same) posts two ``tools/call``s: the default page (top 8) and ``top_k`` 25 (the ranking
further down). Each JSON-RPC ``result`` (rendered text, images and structured content) is
one line of ``--out``, keys sorted. With ``--against`` the two files are compared line by
line; exit code 1 and the first differences when any line differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import DEFAULT_CORPUS, PROVIDER_ROLES, WORK_DIR, log
from benchmarks.mcp_server import running_server, server_env
from benchmarks.serving import CALL_TIMEOUT, POST_HEADERS

#: What the server's base URL (its port changes per run) is replaced with in the snapshot.
BASE = "http://BASE"

#: The calls made per question (arguments besides ``query``).
VARIANTS: tuple[dict[str, Any], ...] = ({}, {"top_k": 25})

DEFAULT_EVALS = (DEFAULT_CORPUS / "eval" / "regulatory", DEFAULT_CORPUS / "eval" / "financebench")


async def snapshot(base: str, questions: Sequence[tuple[str, str]]) -> list[str]:
    """One sorted-key JSON line per (question, variant): ``{"id", "args", "result"}``; a
    transport or HTTP failure is recorded as ``{"error": ...}`` in place of the result."""
    import httpx  # noqa: PLC0415

    lines: list[str] = []
    async with httpx.AsyncClient(base_url=base, timeout=CALL_TIMEOUT) as http:
        for number, (qid, question) in enumerate(questions):
            for variant in VARIANTS:
                arguments = {"query": question, **variant}
                body = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                        "params": {"name": "search_docs", "arguments": arguments}}
                response = await http.post("/mcp", json=body, headers=POST_HEADERS)
                if response.status_code != 200:
                    outcome: Any = {"error": f"HTTP {response.status_code}"}
                else:
                    message = response.json()
                    outcome = message.get("result", {"error": message.get("error")})
                line = json.dumps({"id": qid, "args": arguments, "result": outcome},
                                  sort_keys=True, ensure_ascii=False)
                lines.append(line.replace(base, BASE))
    return lines


def differences(before: Sequence[str], after: Sequence[str], shown: int = 5) -> list[str]:
    """Human-readable differences between two snapshots (at most ``shown`` lines listed)."""
    problems: list[str] = []
    if len(before) != len(after):
        problems.append(f"{len(before)} lines before, {len(after)} after")
    for old, new in zip(before, after, strict=False):
        if old != new:
            problems.append(f"differs: {json.loads(old)['id']} {json.loads(old)['args']}")
    return problems[:shown] + ([f"… {len(problems) - shown} more"] if len(problems) > shown else [])


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, take the snapshot, compare it when asked; exit 1 on any difference."""
    from benchmarks.retrieval import load_eval_set  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m benchmarks.search_snapshot",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--home", type=Path, required=True, help="a built KB_HOME")
    parser.add_argument("--eval", type=Path, action="append", dest="evals", metavar="DIR",
                        help="folder with questions.jsonl (repeatable; default both shared sets)")
    parser.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    parser.add_argument("--against", type=Path, help="an earlier snapshot to compare with")
    args = parser.parse_args(argv)
    questions = [(q.id, q.question) for folder in (args.evals or DEFAULT_EVALS)
                 for q in load_eval_set(folder).questions]
    home = args.home.resolve()
    local = {f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES}
    with running_server(home, WORK_DIR / "search-snapshot-server.log",
                        env=server_env(home, **local)) as server:
        lines = asyncio.run(snapshot(server.base, questions))
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log(f"{len(lines)} answers written to {args.out}")
    if args.against is None:
        return 0
    problems = differences(args.against.read_text(encoding="utf-8").splitlines(), lines)
    for problem in problems:
        print(problem)
    print("identical" if not problems else "DIFFERENT")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
