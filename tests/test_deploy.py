"""The Azure Container Apps deployment in `infra/containerapp.bicep`, checked offline: parsed as Bicep
(pycep-parser), every property name of its Container Apps resources found in the API's models (the
`azure-mgmt-appcontainers` SDK), and what it configures matched with what the image and the
settings expect (the secret behind MCP_API_KEY, the /data volume, the probes, the scale rule, the
port). Nothing here reaches Azure: a deployment to a live subscription is not tested."""

from __future__ import annotations

import re
import socket
import sys
import typing
from pathlib import Path

import pytest

pycep = pytest.importorskip("pycep")
models = pytest.importorskip("azure.mgmt.appcontainers.models")

ROOT = Path(__file__).resolve().parents[1]
BICEP = ROOT / "infra" / "containerapp.bicep"
_Model = pytest.importorskip("azure.mgmt.appcontainers._utils.model_base").Model
MODEL_OF = {"Microsoft.App/containerApps": "ContainerApp", "Microsoft.App/managedEnvironments": "ManagedEnvironment",
            "Microsoft.App/managedEnvironments/storages": "ManagedEnvironmentStorage"}


def _parsed() -> dict:
    from pycep import BicepParser

    return BicepParser().parse(file_path=BICEP)


def _fields(cls) -> dict[str, typing.Any]:
    """JSON property name -> type annotation, for one SDK model."""
    hints = typing.get_type_hints(cls, globalns={**vars(sys.modules[cls.__module__]), "_models": models})
    return {f._rest_name: hints.get(attr) for attr, f in cls()._attr_to_rest_field.items()}


def _model(annotation) -> tuple[type | None, bool]:
    """The model class an annotation holds (through Optional and list), and whether it is a list."""
    is_list = False
    for _ in range(4):
        origin = typing.get_origin(annotation)
        if origin is typing.Union:
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = next((a for a in args if (isinstance(a, type) and issubclass(a, _Model))
                               or typing.get_origin(a) in (list, typing.List)), args[0] if args else None)
        elif origin in (list, typing.List):
            is_list = True
            annotation = typing.get_args(annotation)[0]
        else:
            break
    if isinstance(annotation, type) and issubclass(annotation, _Model):
        return annotation, is_list
    return None, is_list


def _literal_objects(value) -> list:
    """The literal objects and arrays a Bicep value holds: itself, or the arguments and branches of
    the functions and conditionals (concat, a ? b : c) that build it."""
    if isinstance(value, dict) and ("function" in value or "operator" in value):
        inner = value.get("function") or value.get("operator")
        parts = inner.get("parameters") or inner.get("operands") or {}
        return [x for v in parts.values() for x in _literal_objects(v)]
    return [value]


def _check(node: dict, cls, path: str, problems: list[str]) -> None:
    fields = _fields(cls)
    for key, value in node.items():
        if key not in fields:
            problems.append(f"{path}.{key}: not a property of {cls.__name__}")
            continue
        sub, is_list = _model(fields[key])
        if sub is None:
            continue
        for obj in _literal_objects(value):
            items = obj if isinstance(obj, list) else [obj]
            for i, item in enumerate(items):
                if isinstance(item, dict) and not ("function" in item or "operator" in item):
                    _check(item, sub, f"{path}.{key}" + (f"[{i}]" if is_list else ""), problems)


def test_the_bicep_file_parses_and_names_only_real_properties():
    parsed = _parsed()
    resources = parsed["resources"]
    assert {r["type"] for r in resources.values()} >= set(MODEL_OF)
    problems: list[str] = []
    for name, res in resources.items():
        if res["type"] in MODEL_OF:
            cls = getattr(models, MODEL_OF[res["type"]])
            props = res["config"].get("properties") or {}
            # The resource's own properties are the model's `properties` object.
            _check(props, _model(_fields(cls)["properties"])[0], name, problems)
    assert problems == []
    # The check is real: a misspelt property is caught.
    broken: list[str] = []
    app = resources["app"]["config"]["properties"]
    _check({**app, "template": {**app["template"], "scaling": {}}},
           _model(_fields(models.ContainerApp)["properties"])[0], "app", broken)
    assert broken == ["app.template.scaling: not a property of Template"]


def _items(value, variables: dict) -> list[dict]:
    """The objects of the arrays a Bicep value is built from, through the variables it names."""
    out = []
    for obj in _literal_objects(value):
        if isinstance(obj, str) and obj in variables:
            out += _items(variables[obj]["value"], variables)
        elif isinstance(obj, list):
            out += [e for e in obj if isinstance(e, dict)]
    return out


def _env(container: dict, variables: dict) -> dict[str, dict]:
    return {e["name"]: e for e in _items(container["env"], variables)}


def test_the_app_is_configured_as_the_image_expects():
    parsed = _parsed()
    app = parsed["resources"]["app"]["config"]["properties"]
    config, template = app["configuration"], app["template"]
    secrets = {s["name"] for s in _items(config["secrets"], parsed["variables"])}
    (container,) = template["containers"]
    env = _env(container, parsed["variables"])
    # MCP_API_KEY comes from a secret, never a plain value; so do the store URL and the HMAC key.
    assert env["MCP_API_KEY"] == {"name": "MCP_API_KEY", "secretRef": "mcp-api-key"} and "mcp-api-key" in secrets
    assert env["SOURCEGATE_STORE"]["secretRef"] in secrets and env["AUDIT_HMAC_KEY"]["secretRef"] == "audit-hmac-key"
    for param in ("mcpApiKey", "storeUrl", "auditHmacKey", "registryPassword"):
        assert {"type": "secure"} in parsed["parameters"][param]["decorators"], param
    # Every variable it sets is one sourcegate reads.
    from sourcegate.settings import Settings

    aliases = {str(a).upper() for f in Settings.model_fields.values() for a in re.findall(r"'([A-Z_]+)'", repr(f))}
    for name in env:
        assert name in aliases or name == "SERVE_WORKERS", name
    # The port of the image, its volume and its probes.
    containerfile = (ROOT / "Containerfile").read_text()
    assert config["ingress"]["targetPort"] == 8000 and "EXPOSE 8000" in containerfile
    assert config["ingress"]["allowInsecure"] is False
    (mount,) = container["volumeMounts"]
    assert mount["mountPath"] == "/data" and 'VOLUME ["/data"]' in containerfile
    (volume,) = template["volumes"]
    assert volume["name"] == mount["volumeName"] and volume["storageType"] == "AzureFile"
    probes = {p["type"]: p["httpGet"] for p in container["probes"]}
    assert probes["Liveness"]["path"] == "/healthz" and probes["Readiness"]["path"] == "/readyz"
    assert probes["Startup"]["path"] == "/healthz" and all(p["port"] == 8000 for p in probes.values())
    scale = template["scale"]
    assert [r["name"] for r in scale["rules"]] == ["http-load"] and "http" in scale["rules"][0]
    # SIGTERM leaves time for the questions in flight: the grace period exceeds the shutdown timeout.
    assert template["terminationGracePeriodSeconds"] > int(env["SERVE_SHUTDOWN_TIMEOUT_S"]["value"])
    assert env["AUDIT_LOG_PATH"]["value"] == "/data/audit/{hostname}.jsonl"


def test_hostname_in_the_audit_log_path_gives_one_log_per_replica(tmp_path):
    from sourcegate.audit import AuditLog, verify_chain
    from sourcegate.settings import Settings

    s = Settings(_env_file=None, audit_log_path=tmp_path / "audit" / "{hostname}.jsonl")
    assert s.audit_path == tmp_path / "audit" / f"{socket.gethostname()}.jsonl"
    log = AuditLog(s.audit_path)
    log.append({"audit_id": "a1", "query": "q"})
    assert verify_chain(s.audit_path).ok and s.audit_path.exists()


def test_the_deployment_guide_gives_the_commands():
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for needle in ("az deployment group create", "infra/containerapp.bicep", "podman build", "az webapp",
                   "SOURCEGATE_STORE=\"postgresql://", "x-api-key", "Copilot Studio", "were not run against a live Azure"):
        assert needle in text, needle


def test_the_guides_podman_commands_keep_the_healthcheck_and_the_key():
    """Every `podman build` in docs/deploy.md says `--format docker` (podman's OCI default drops the
    HEALTHCHECK), and no command makes an API key it then throws away (`-e MCP_API_KEY="$(openssl ...)"`)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text(encoding="utf-8")
    builds = [line for line in text.splitlines() if re.match(r"\s*podman build\b", line)]
    assert builds and all("--format docker" in line for line in builds), builds
    assert not re.search(r"-e MCP_API_KEY=\"?\$\(openssl", text)
    assert "mcp-api-key.txt" in text and "-e MCP_API_KEY -e ALLOWED_HOSTS=" in text
    gitignore = (Path(__file__).resolve().parents[1] / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "wheels/" in gitignore


def test_the_web_sign_in_takes_its_secrets_from_secrets():
    """The page's sign-in (docs/entra-id.md#web-page-sign-in): its client secret and cookie key are
    secrets, and its redirect URI is the app's own https callback."""
    parsed = _parsed()
    app = parsed["resources"]["app"]["config"]["properties"]
    secrets = {s["name"] for s in _items(app["configuration"]["secrets"], parsed["variables"])}
    (container,) = app["template"]["containers"]
    env = _env(container, parsed["variables"])
    assert env["AUTH_WEB_CLIENT_ID"]["value"] == "authWebClientId"
    for name, secret in (("AUTH_WEB_SESSION_KEY", "web-session-key"), ("AUTH_WEB_CLIENT_SECRET", "web-client-secret")):
        assert env[name] == {"name": name, "secretRef": secret} and secret in secrets, name
    for param in ("authWebClientSecret", "authWebSessionKey"):
        assert {"type": "secure"} in parsed["parameters"][param]["decorators"], param
    assert "/auth/callback" in str(env["AUTH_WEB_REDIRECT_URI"]["value"])
