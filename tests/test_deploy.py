"""The deployment files (deploy/, docs/deploy.md) cannot drift from the code (issue 15): every
``KB_*`` or provider variable they set is a ``Settings`` field and its value is valid there,
every variable a role needs is set, secrets only come from the environment, the pipeline and
kb-mcp agree on the embedding model, and the images' entry points are real commands."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb_assets.instance import postgres_url as dagster_postgres_url
from kb_shared.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent

#: What each role cannot run without (docs/deploy.md, "What each part needs").
PIPELINE_NEEDS = {
    "KB_HOME", "KB_BLOB_URL", "KB_DATABASE_URL", "KB_DAGSTER_POSTGRES_URL", "KB_QDRANT_URL",
    "KB_QDRANT_API_KEY", "KB_NEO4J_URI", "KB_NEO4J_PASSWORD",
}
MCP_NEEDS = {
    "KB_HOME", "KB_BLOB_URL", "KB_READER_DATABASE_URL", "KB_QDRANT_URL", "KB_QDRANT_API_KEY",
    "KB_NEO4J_URI", "KB_NEO4J_PASSWORD", "KB_MCP_HOST", "KB_MCP_TOKENS", "KB_PUBLIC_URL",
}
DAGSTER_NEEDS = {"DAGSTER_HOME", "KB_DAGSTER_POSTGRES_URL"}
#: Writer credentials kb-mcp must never hold (read-only everywhere).
MCP_NEVER = {"KB_DATABASE_URL", "KB_DAGSTER_POSTGRES_URL", "ANTHROPIC_API_KEY"}
#: Settings that decide the vector space: the pipeline and kb-mcp must agree.
MODEL_SETTINGS = (
    "KB_EMBEDDING_PROVIDER", "KB_LOCAL_EMBEDDING_MODEL", "KB_GEMINI_EMBEDDING_DIMENSION",
    "GEMINI_API_KEY",
)
#: Variables a kb container may set that are not kb settings.
NOT_SETTINGS = {"DAGSTER_HOME"}

_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:[-?])(?P<arg>[^}]*))?\}")


def settings_names() -> dict[str, str]:
    """Environment variable -> ``Settings`` field, every alias included."""
    names: dict[str, str] = {}
    for field, info in Settings.model_fields.items():
        aliases = getattr(info.validation_alias, "choices", None) or []
        choices = [c for c in aliases if isinstance(c, str)]
        for env in choices or [f"KB_{field.upper()}"]:
            names[env] = field
    return names


SETTINGS = settings_names()
SECRET_FIELDS = {
    field for field, info in Settings.model_fields.items() if "SecretStr" in str(info.annotation)
} | {"mcp_tokens"}


def is_secret(name: str) -> bool:
    field = SETTINGS.get(name)
    if field is not None:
        return field in SECRET_FIELDS or field.endswith("database_url")
    return any(word in name for word in ("PASSWORD", "API_KEY", "TOKEN", "NEO4J_AUTH"))


def interpolate(value: str, environment: Mapping[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?message}``."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        if environment.get(name):
            return environment[name]
        if op == ":?":
            raise AssertionError(f"{name} is required: {arg}")
        return arg if op == ":-" else ""

    return _REFERENCE.sub(one, value)


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def required_references(text: str) -> set[str]:
    """Names of the ``${NAME:?…}`` references outside comments: what must be set."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return {m["name"] for m in _REFERENCE.finditer(code) if m["op"] == ":?"}


def kb_services() -> dict[str, dict[str, Any]]:
    """Compose services that run kb's image, by name."""
    image = compose()["x-kb-image"]["image"]
    return {name: s for name, s in compose()["services"].items() if s.get("image") == image}


def role(service: Mapping[str, Any]) -> str:
    return service["command"][0]


# --- compose ----------------------------------------------------------------------------------


def test_compose_runs_every_part_with_two_mcp_replicas_behind_one_port() -> None:
    services = compose()["services"]
    roles = sorted(role(s) for s in kb_services().values())
    assert roles == ["code-location", "daemon", "init", "mcp", "mcp", "webserver"]
    assert {"postgres", "qdrant", "neo4j", "mcp-proxy"} <= set(services)
    replicas = sorted(n for n, s in kb_services().items() if role(s) == "mcp")
    assert replicas == ["kb-mcp-1", "kb-mcp-2"]
    assert all("ports" not in kb_services()[name] for name in replicas)
    assert services["mcp-proxy"]["ports"] == ["${KB_MCP_BIND:-127.0.0.1}:8080:8080"]
    nginx = (DEPLOY / "nginx.conf").read_text()
    upstream = re.findall(r"^\s*server (kb-mcp-\d):8765\b", nginx, flags=re.MULTILINE)
    assert upstream == replicas
    assert "proxy_set_header Host $http_host;" in nginx


def compose_environments() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, service in kb_services().items():
        yield name, role(service), dict(service.get("environment") or {})


def test_every_variable_a_kb_container_sets_is_a_setting_with_a_valid_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = {name: "x" * 12 for name in required_references((DEPLOY / "compose.yaml").read_text())}
    for service, _, environment in compose_environments():
        unknown = sorted(set(environment) - set(SETTINGS) - NOT_SETTINGS)
        assert unknown == [], f"{service} sets variables Settings does not have: {unknown}"
        for name, value in environment.items():
            if name in NOT_SETTINGS:
                continue
            if value is None:  # passed through from the host only when set there
                monkeypatch.delenv(name, raising=False)
                continue
            monkeypatch.setenv(name, interpolate(str(value), fake))
        settings = Settings()  # raises SettingsError naming any value Settings refuses
        dagster_postgres_url(settings)  # DagsterInstanceError unless postgresql+psycopg2://
        for name in environment:
            monkeypatch.delenv(name, raising=False)


def test_every_role_in_compose_gets_what_it_needs() -> None:
    needs = {"code-location": PIPELINE_NEEDS, "init": PIPELINE_NEEDS, "mcp": MCP_NEEDS,
             "webserver": DAGSTER_NEEDS, "daemon": DAGSTER_NEEDS}
    for service, kind, environment in compose_environments():
        missing = sorted(needs[kind] - set(environment))
        assert missing == [], f"{service} ({kind}) lacks {missing}"
        if kind == "mcp":
            assert sorted(MCP_NEVER & set(environment)) == [], service


def test_compose_secrets_come_only_from_the_environment() -> None:
    for name, service in compose()["services"].items():
        for variable, value in (service.get("environment") or {}).items():
            if value is None or not is_secret(variable):
                continue
            text = str(value)
            url = re.fullmatch(r"[a-z0-9+]+://[^:@/]+:(?P<password>.+)@[^@]+", text)
            # a URL's password, a bare reference, or Neo4j's `neo4j/${PASSWORD}` form
            secret = url["password"] if url else text.removeprefix("neo4j/")
            assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]+\}", secret), (
                f"{name}: {variable} must come from the environment (${{NAME:?…}}), not {text!r}"
            )


def test_kb_mcp_holds_only_read_only_credentials() -> None:
    for _, kind, environment in compose_environments():
        if kind != "mcp":
            continue
        assert environment["KB_READER_DATABASE_URL"].startswith("postgresql+psycopg://kb_reader:")
        assert environment["KB_QDRANT_API_KEY"].startswith("${QDRANT_READ_ONLY_API_KEY:?")
    qdrant = compose()["services"]["qdrant"]["environment"]
    assert qdrant["QDRANT__SERVICE__READ_ONLY_API_KEY"].startswith("${QDRANT_READ_ONLY_API_KEY:?")
    for service in kb_services().values():
        if role(service) == "mcp":
            assert service["volumes"] == ["kb-data:/data:ro"]


def test_the_pipeline_and_kb_mcp_agree_on_the_embedding_model() -> None:
    by_role = {kind: env for _, kind, env in compose_environments()}
    for name in MODEL_SETTINGS:
        assert by_role["code-location"][name] == by_role["mcp"][name], name
    config = {doc["metadata"]["name"]: doc["data"] for doc in k8s("kb-config.yaml")}
    for name in MODEL_SETTINGS[:-1]:
        assert config["kb-config"][name] == config["kb-mcp-config"][name], name


def test_env_example_lists_every_secret_compose_requires() -> None:
    example = (DEPLOY / "env.example").read_text()
    listed = set(re.findall(r"^([A-Z0-9_]+)=", example, flags=re.MULTILINE))
    assert required_references((DEPLOY / "compose.yaml").read_text()) <= listed
    assert re.findall(r"^[A-Z0-9_]*(?:PASSWORD|KEY|TOKENS)=(.+)$", example, re.MULTILINE) == []


# --- the Dagster instance of the deployments ----------------------------------------------------


def test_the_deployed_dagster_instance_is_on_postgres_with_queue_and_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster._core.instance.config import dagster_instance_config

    shutil.copy(DEPLOY / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("KB_DAGSTER_POSTGRES_URL", "postgresql+psycopg2://u:p@db/dagster")
    config, _ = dagster_instance_config(str(tmp_path))  # Dagster's own schema check
    assert config["storage"] == {"postgres": {"postgres_url": {"env": "KB_DAGSTER_POSTGRES_URL"}}}
    runs = config["concurrency"]["runs"]
    (backfill,) = runs["tag_concurrency_limits"]
    assert backfill["key"] == "dagster/backfill"
    assert 1 <= backfill["limit"] < runs["max_concurrent_runs"]
    assert config["concurrency"]["pools"]["granularity"] == "op"
    workspace = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
    assert workspace["load_from"] == [
        {"grpc_server": {"host": "code-location", "port": 4000, "location_name": "kb"}}
    ]


# --- Kubernetes ---------------------------------------------------------------------------------


def k8s(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if doc]


def helm() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())


def container_variables(env: list[dict[str, Any]], config_maps: list[str]) -> dict[str, Any]:
    """Variable -> its value or ``valueFrom``, with the ConfigMaps' data included."""
    data = {doc["metadata"]["name"]: doc["data"] for doc in k8s("kb-config.yaml")}
    variables: dict[str, Any] = {}
    for name in config_maps:
        variables.update(data[name])
    for item in env:
        variables[item["name"]] = item.get("value", item.get("valueFrom"))
    return variables


def check_variables(variables: Mapping[str, Any], needs: set[str], where: str) -> None:
    unknown = sorted(set(variables) - set(SETTINGS) - NOT_SETTINGS)
    assert unknown == [], f"{where} sets variables Settings does not have: {unknown}"
    missing = sorted(needs - set(variables))
    assert missing == [], f"{where} lacks {missing}"
    for name, value in variables.items():
        if is_secret(name):
            assert isinstance(value, dict) and "secretKeyRef" in value, f"{where}: {name}"
            assert value["secretKeyRef"]["key"] == name
        else:
            assert isinstance(value, str), f"{where}: {name} must be a literal setting"


def test_helm_values_use_k8s_runs_postgres_storage_and_pools() -> None:
    values = helm()
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    postgres = values["postgresql"]
    assert postgres["enabled"] is False and postgres["postgresqlScheme"] == "postgresql+psycopg2"
    assert values["generatePostgresqlPasswordSecret"] is False
    concurrency = values["concurrency"]
    assert concurrency["enabled"] is True and concurrency["pools"]["granularity"] == "op"
    assert concurrency["runs"]["tagConcurrencyLimits"][0]["key"] == "dagster/backfill"
    assert values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"] == {}
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["codeServerArgs"] == [
        "--module-name", "kb_assets.definitions", "--attribute", "defs",
    ]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    config_maps = [ref["name"] for ref in deployment["envConfigMaps"]]
    variables = container_variables(deployment["env"], config_maps)
    check_variables(variables, PIPELINE_NEEDS, "helm code location")
    for part in (values["dagsterWebserver"], values["dagsterDaemon"], deployment):
        assert part["image"]["repository"] == deployment["image"]["repository"]


def test_kb_mcp_deployment_has_two_replicas_ready_on_healthz_and_read_only_stores() -> None:
    deployment, service, _budget = k8s("kb-mcp.yaml")
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    (container,) = spec["template"]["spec"]["containers"]
    assert container["args"] == ["mcp"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8765}]
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    config_maps = [ref["configMapRef"]["name"] for ref in container["envFrom"]]
    variables = container_variables(container["env"], config_maps)
    check_variables(variables, MCP_NEEDS, "kb-mcp Deployment")
    assert sorted(MCP_NEVER & set(variables)) == []
    (mount,) = container["volumeMounts"]
    assert mount == {"name": "kb-data", "mountPath": "/data", "readOnly": True}
    secrets = {v["secretKeyRef"]["name"] for v in variables.values() if isinstance(v, dict)}
    assert secrets == {"kb-mcp-secrets"}


def test_kb_init_job_gets_the_pipeline_settings() -> None:
    (job,) = k8s("kb-init.yaml")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["init"]
    config_maps = [ref["configMapRef"]["name"] for ref in container["envFrom"]]
    check_variables(container_variables(container["env"], config_maps), PIPELINE_NEEDS, "kb-init")


# --- the image ----------------------------------------------------------------------------------


def test_dockerfile_copies_files_that_exist_and_enters_through_the_role_script() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    sources = [
        part
        for line in re.findall(r"^COPY (.+)$", dockerfile, flags=re.MULTILINE)
        for part in line.split()[:-1]
        if not part.startswith("--")
    ]
    assert sources and all((ROOT / s).exists() for s in sources), sources
    assert 'ENTRYPOINT ["kb-entrypoint"]' in dockerfile
    entry = "COPY --chmod=0755 deploy/docker-entrypoint.sh /usr/local/bin/kb-entrypoint"
    assert entry in dockerfile
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert all(f"!{s}" in ignored or f"!{s}/**" in ignored for s in sources)


def entrypoint_roles() -> dict[str, list[str]]:
    """Role -> the command its ``exec`` line runs (continuation lines joined)."""
    script = (DEPLOY / "docker-entrypoint.sh").read_text().replace("\\\n", " ")
    roles: dict[str, list[str]] = {}
    for match in re.finditer(r"^\s+([a-z-]+)\)\n(.*?);;", script, flags=re.MULTILINE | re.DOTALL):
        lines = [line.strip() for line in match[2].splitlines()]
        body = [line for line in lines if line and not line.startswith("#")]
        roles[match[1]] = [ln for ln in body if ln.startswith(("exec ", "kb "))]
    return roles


def test_entrypoint_has_the_three_roles_the_deployments_start() -> None:
    roles = entrypoint_roles()
    assert sorted(roles) == ["code-location", "daemon", "init", "mcp", "webserver"]
    used = {role(s) for s in kb_services().values()}
    used |= {k8s("kb-mcp.yaml")[0]["spec"]["template"]["spec"]["containers"][0]["args"][0]}
    assert used <= set(roles)
    subprocess.run(["sh", "-n", str(DEPLOY / "docker-entrypoint.sh")], check=True)


@pytest.mark.slow
def test_every_entrypoint_command_exists_in_this_environment() -> None:
    from kb_assets.instance import main  # `init`'s second step: python -m kb_assets.instance

    assert callable(main)
    commands = {
        "code-location": [str(BIN / "dagster"), "code-server", "start", "--help"],
        "webserver": [str(BIN / "dagster-webserver"), "--help"],
        "daemon": [str(BIN / "dagster-daemon"), "run", "--help"],
        "mcp": [str(BIN / "kb-mcp"), "serve", "--help"],
        "init": [str(BIN / "kb"), "db", "init", "--help"],
    }
    roles = entrypoint_roles()
    # all at once: each start imports Dagster or kb (seconds each on a loaded 2-core machine)
    started = {
        name: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, argv in commands.items()
    }
    for name, process in started.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, (name, err[-500:])
        program = Path(commands[name][0]).name
        executed = next(line.split() for line in roles[name] if program in line.split()[:2])
        for option in re.findall(r"(--[a-z-]+)", " ".join(executed)):
            assert option in out, (name, option)
