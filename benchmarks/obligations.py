"""The obligation detector (``kb_shared.compliance.obligations``) against hand labels (issue 26, "How it
is judged"): precision and recall for must / must not and for should / should not, party
accuracy and page accuracy per labelled document, the count of obligations of every shared
regulatory PDF, and the detector's time per document.

Chunks come from a benchmark home that has built the shared regulatory PDFs
(``benchmarks/work/retrieval-regulatory`` by default: ``blobs/chunks/*.parquet``); labels
from ``tests/data/obligations/*.jsonl`` (one obligation a line: page, text, party, role,
modality). A found obligation matches a label on the same page whose sentence shares enough
of its words (``match``); the party is right when the roles agree or one party's words hold
the other's.

Run: ``python -m benchmarks.obligations [--home DIR] [--labels DIR] [--variant NAME]``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import REPO_ROOT, WORK_DIR, Report, load_average, log

DEFAULT_HOME = WORK_DIR / "retrieval-regulatory"
DEFAULT_LABELS = REPO_ROOT / "tests" / "data" / "obligations"
#: Documents whose labels (and errors) were read while writing the rules: tuned on; any other
#: labelled document is held out (notes of the report).
TUNED_ON = frozenset({"aemo_so_op_3705_dispatch", "vic_solarvictoria_noticetomarket_2025-26_v1"})
#: Share of a label's words (and of the found sentence's) two sentences must share to be one:
#: a stem-joined list item shares its stem with its siblings, so the item words decide.
MATCH_OVERLAP = 0.6
#: Runs of the detector per document; the fastest is reported (the machine is shared).
TIMING_RUNS = 3
#: Labels a role needs in a document for its completeness row (issue 26, "Completeness").
MIN_ROLE_LABELS = 5

_WORD = re.compile(r"[a-z0-9]+")
_DETERMINERS = frozenset("the a an any all each every relevant its their".split())


@dataclass(frozen=True)
class Label:
    """One hand-labelled obligation (a line of a label file)."""

    page: int
    text: str
    party: str | None
    role: str | None
    modality: str


def read_labels(path: Path) -> list[Label]:
    """The labels of one ``.jsonl`` file, in file order."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(Label(int(row["page"]), row["text"], row.get("party"), row.get("role"), row["modality"]))
    return out


def words(text: str) -> set[str]:
    """Lower-case word set of ``text``."""
    return set(_WORD.findall(text.lower()))


def overlap(a: str, b: str) -> float:
    """Dice overlap of the two texts' word sets (0-1)."""
    left, right = words(a), words(b)
    if not left or not right:
        return 0.0
    return 2 * len(left & right) / (len(left) + len(right))


def party_right(label: Label, party: str, role: str | None) -> bool:
    """The found party is the labelled one: same role (case-insensitive), or one party's words
    (determiners aside) hold the other's; no party on both sides counts as right."""
    if not label.party and not party:
        return True
    if label.role and role and label.role.casefold() == role.casefold():
        return True
    want = words(label.party or "") - _DETERMINERS
    have = words(party) - _DETERMINERS
    return bool(want and have) and (want <= have or have <= want)


def _group(modality: str) -> str:
    return "must" if modality.startswith("must") else "should"


@dataclass(frozen=True)
class Match:
    """The pairing of found obligations with labels for one document."""

    pairs: list[tuple[int, int]]  # (label index, found index), same page
    moved: list[tuple[int, int]]  # text matches one page off


def match(labels: Sequence[Label], found: Sequence[object]) -> Match:
    """Pair labels with found obligations (objects with ``text``, ``page``, ``party``,
    ``role``): greedily by text overlap ≥ ``MATCH_OVERLAP``, the right party breaking ties,
    each used once; pairs on the same page first, then text matches one page off (a page
    error, counted against page accuracy)."""
    used_label: set[int] = set()
    used_found: set[int] = set()
    pairs: list[tuple[int, int]] = []
    moved: list[tuple[int, int]] = []
    for same_page, into in ((True, pairs), (False, moved)):
        scored = []
        for li, label in enumerate(labels):
            for fi, ob in enumerate(found):
                page = getattr(ob, "page", None)
                if same_page != (page == label.page) or (page is not None and abs(page - label.page) > 1):
                    continue
                score = overlap(label.text, ob.text)  # type: ignore[attr-defined]
                if score >= MATCH_OVERLAP:
                    bonus = 0.01 if party_right(label, ob.party, ob.role) else 0.0  # type: ignore[attr-defined]
                    scored.append((score + bonus, li, fi))
        for _, li, fi in sorted(scored, reverse=True):
            if li not in used_label and fi not in used_found:
                used_label.add(li)
                used_found.add(fi)
                into.append((li, fi))
    return Match(pairs, moved)


def scores(labels: Sequence[Label], found: Sequence[object]) -> dict[str, object]:
    """Precision, recall, party and page accuracy of ``found`` against ``labels`` (same page;
    ``match``), per modality group ("must": must / must not; "should": should / should not)."""
    paired = match(labels, found)
    out: dict[str, object] = {}
    for group in ("must", "should"):
        want = [i for i, lab in enumerate(labels) if _group(lab.modality) == group]
        have = [i for i, ob in enumerate(found) if _group(ob.modality) == group]  # type: ignore[attr-defined]
        hits = [(li, fi) for li, fi in paired.pairs if _group(labels[li].modality) == group
                and _group(found[fi].modality) == group]  # type: ignore[attr-defined]
        out[f"{group}_labels"] = len(want)
        out[f"{group}_found"] = len(have)
        out[f"{group}_hits"] = len(hits)
        out[f"{group}_precision"] = len(hits) / len(have) if have else None
        out[f"{group}_recall"] = len(hits) / len(want) if want else None
    right = [party_right(labels[li], found[fi].party, found[fi].role) for li, fi in paired.pairs]  # type: ignore[attr-defined]
    out["matched"] = len(paired.pairs)
    out["party_accuracy"] = sum(right) / len(right) if right else None
    text_matches = len(paired.pairs) + len(paired.moved)
    out["page_accuracy"] = len(paired.pairs) / text_matches if text_matches else None
    out["missed"] = [labels[i] for i in range(len(labels)) if i not in {li for li, _ in paired.pairs}]
    out["extra"] = [found[i] for i in range(len(found)) if i not in {fi for _, fi in paired.pairs}]
    out["wrong_party"] = [(labels[li], found[fi]) for (li, fi), ok in zip(paired.pairs, right, strict=True) if not ok]
    return out


def party_filter(ob: object, wanted: str) -> bool:
    """``Catalog.search_obligations``'s party filter on one found obligation: its role equals
    ``wanted`` or its party phrase contains it, ignoring case
    (``kb_shared/stores/catalog/obligations.py``)."""
    wanted = wanted.lower()
    role = (getattr(ob, "role", None) or "").lower()
    return role == wanted or wanted in getattr(ob, "party", "").lower()


def completeness(labels: Sequence[Label], found: Sequence[object]) -> list[tuple[str, int, int, int]]:
    """For each role with at least ``MIN_ROLE_LABELS`` labels: ``(role, labelled, returned,
    right)``: the labels of that role, the found obligations the party filter returns for
    it (``party_filter``), and how many of those are matched (``match``) to a label of that
    role. Most labelled first."""
    pairs = dict((fi, li) for li, fi in match(labels, found).pairs)
    counts: dict[str, int] = {}
    for label in labels:
        if label.role:
            counts[label.role] = counts.get(label.role, 0) + 1
    rows = []
    for role, labelled in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if labelled < MIN_ROLE_LABELS:
            continue
        returned = [fi for fi, ob in enumerate(found) if party_filter(ob, role)]
        right = sum(1 for fi in returned if fi in pairs and labels[pairs[fi]].role == role)
        rows.append((role, labelled, len(returned), right))
    return rows


def load_chunks(home: Path) -> dict[str, list]:
    """Chunks of each document built in ``home`` (``blobs/chunks/<name>.parquet``), by file
    stem without ``.pdf``."""
    from kb_assets.io_manager import chunks_from_parquet  # noqa: PLC0415

    folder = home / "blobs" / "chunks"
    return {
        path.name.removesuffix(".parquet").removesuffix(".pdf"): chunks_from_parquet(path.read_bytes())
        for path in sorted(folder.glob("*.parquet"))
    }


def _fmt(value: object) -> str:
    return "—" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print a summary and write the report."""
    from kb_shared.compliance.obligations import find_obligations  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    parser.add_argument("--variant", default="")
    parser.add_argument("--no-report", action="store_true", help="print only")
    args = parser.parse_args(argv)

    report = Report("obligations", "Obligation detector against hand labels", variant=args.variant)
    report.fact("chunks from", args.home)
    report.fact("labels from", args.labels)
    documents = load_chunks(args.home)
    if not documents:
        raise SystemExit(f"no chunks under {args.home / 'blobs' / 'chunks'}: build the home first")
    found: dict[str, list] = {}
    seconds: dict[str, float] = {}
    for name, chunks in documents.items():
        runs = []
        for _ in range(TIMING_RUNS):
            started = time.perf_counter()
            found[name] = find_obligations(chunks)
            runs.append(time.perf_counter() - started)
        seconds[name] = min(runs)
    load = load_average()

    rows = []
    details = []
    complete_rows = []
    for path in sorted(args.labels.glob("*.jsonl")):
        name = path.stem
        if name not in found:
            log(f"{name}: labelled but not built in {args.home}; skipped")
            continue
        labels = read_labels(path)
        result = scores(labels, found[name])
        for role, labelled, returned, right in completeness(labels, found[name]):
            complete_rows.append((name, role, str(labelled), str(returned), str(right), _fmt(returned / labelled)))
        rows.append((
            name, "tuned on" if name in TUNED_ON else "held out (see notes)",
            f"{result['must_labels']} / {result['must_found']} / {result['must_hits']}",
            _fmt(result["must_precision"]), _fmt(result["must_recall"]),
            f"{result['should_labels']} / {result['should_found']} / {result['should_hits']}",
            _fmt(result["should_precision"]), _fmt(result["should_recall"]),
            _fmt(result["party_accuracy"]), _fmt(result["page_accuracy"]),
        ))
        details.append((name, result))
    report.heading("Against the hand labels")
    report.table(
        ("document", "rules", "must labels / found / hits", "must P", "must R",
         "should labels / found / hits", "should P", "should R", "party right", "page right"),
        rows,
    )
    report.heading("Completeness: the party filter against the labelled count per role")
    report.text(
        f"Roles with ≥ {MIN_ROLE_LABELS} labels. *returned*: found obligations "
        "`search_obligations(party=<role>)` would return (role equal, or the party phrase "
        "contains the role word); *right*: those matched to a label of that role."
    )
    report.table(("document", "role", "labelled", "returned", "right", "returned / labelled"), complete_rows)
    for name, result in details:
        report.heading(f"{name}: misses, extras, wrong parties", 3)
        lines = [f"- missed p. {lab.page} [{lab.modality}] {lab.party!r}: {lab.text[:140]}" for lab in result["missed"]]  # type: ignore[attr-defined]
        lines += [f"- extra p. {ob.page} [{ob.modality}] {ob.party!r}: {ob.text[:140]}" for ob in result["extra"]]  # type: ignore[attr-defined]
        lines += [f"- party p. {lab.page}: label {lab.party!r}/{lab.role} vs found {ob.party!r}/{ob.role}" for lab, ob in result["wrong_party"]]  # type: ignore[attr-defined]
        report.text("\n".join(lines) or "none")
        if args.no_report:
            print(f"\n## {name}\n" + "\n".join(lines))
    report.heading("Obligations per shared regulatory PDF")
    count_rows = []
    for name, obligations in found.items():
        by = {m: sum(1 for o in obligations if o.modality == m) for m in ("must", "must not", "should", "should not")}
        chars = sum(len(c.text) for c in documents[name])
        count_rows.append((name, len(documents[name]), chars, len(obligations), by["must"], by["must not"],
                           by["should"], by["should not"], f"{seconds[name] * 1000:.0f}"))
    report.table(("document", "chunks", "characters", "obligations", "must", "must not", "should",
                  "should not", "detector ms (best of 3)"), count_rows)
    report.text(f"Load average (1/5/15 min) after the detector ran: {' / '.join(f'{x:.2f}' for x in load) if load else 'n/a'}.")
    for row in rows:
        print(" | ".join(row))
    for row in complete_rows:
        print(" | ".join(row))
    for row in count_rows:
        print(" | ".join(str(c) for c in row))
    if not args.no_report:
        report.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
