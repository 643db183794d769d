"""``kb_assets.stopping.build_in_turn``: the one loop ``kb build`` and ``kb backfill`` build
documents in turn with — outcomes in order, ``on_done`` per outcome, nothing started after a
stop signal or after a stopped document."""

import signal

from kb_assets.operations import BuildOutcome
from kb_assets.stopping import STOPPED_REASON, build_in_turn


def _outcome(doc_id: str, reason: str = "") -> BuildOutcome:
    status = "failed" if reason else "ready"
    return BuildOutcome(doc_id=doc_id, name=f"{doc_id}.pdf", status=status, run_id="r",
                        seconds=0.0, reason=reason)


def test_groups_are_built_in_order_and_each_outcome_is_reported_as_its_group_ends():
    started: list[list[str]] = []
    reported: list[str] = []

    def build_group(docs):
        started.append(list(docs))
        assert reported == [d for group in started[:-1] for d in group]  # earlier groups told
        return [_outcome(d) for d in docs]

    outcomes = build_in_turn([["a"], ["b", "c"], ["d"]], build_group,
                             lambda o: reported.append(o.doc_id))

    assert started == [["a"], ["b", "c"], ["d"]]
    assert [o.doc_id for o in outcomes] == ["a", "b", "c", "d"]
    assert reported == ["a", "b", "c", "d"]


def test_no_group_starts_after_a_group_with_a_stopped_document():
    started: list[str] = []

    def build_group(docs):
        started.extend(docs)
        return [_outcome(d, STOPPED_REASON if d == "c" else "") for d in docs]

    outcomes = build_in_turn([["a"], ["b", "c"], ["d"]], build_group)

    assert started == ["a", "b", "c"]
    assert [(o.doc_id, o.reason) for o in outcomes] == [
        ("a", ""), ("b", ""), ("c", STOPPED_REASON)
    ]


def test_no_group_starts_after_a_stop_signal_and_the_handlers_are_put_back():
    before = signal.getsignal(signal.SIGINT)
    started: list[str] = []

    def build_group(docs):
        started.extend(docs)
        if docs == ["b"]:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C between two documents
        return [_outcome(d) for d in docs]

    outcomes = build_in_turn([["a"], ["b"], ["c"]], build_group)

    assert started == ["a", "b"]
    assert [o.doc_id for o in outcomes] == ["a", "b"]
    assert signal.getsignal(signal.SIGINT) is before
