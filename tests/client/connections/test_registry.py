"""The connection registry file and the uniform MCP entry view."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from ivoai.client.config.secrets import SecretsStore
from ivoai.client.connections.manage import add_mcp, disconnect_all, list_mcp, remove_mcp, set_enabled
from ivoai.client.connections.registry import ConnectionRegistry
from ivoai.client.connections.urls import normalize_server_url
from ivoai.client.knowledge.profiles import ServerProfile
from ivoai.common.errors import ConflictError, NotFoundError, ValidationError
from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner

EPS = {"context_mcp": "/v1/mcp/context", "memory_mcp": "/v1/memory/mcp"}


def _add_profile(xdg: XdgPaths, alias: str, secret: str = "cred-value-0123456789") -> ServerProfile:
    profile = ServerProfile(
        id=f"srv_{alias.encode().hex():0>32}",
        alias=alias,
        base_url="http://127.0.0.1:9",
        purpose=alias,
        endpoints=EPS,
        features={"context": True, "memory": True},
        scopes=("context:read", "memory:read", "memory:write"),
    )
    SecretsStore(xdg).put(profile.id, secret)
    with ConnectionRegistry(xdg).update() as state:
        state.servers.append(profile)
    return profile


def test_registry_is_private_and_holds_no_secret(xdg: XdgPaths) -> None:
    _add_profile(xdg, "team", secret="super-secret-credential-value")
    add_mcp(xdg, "tools", "https://mcp.example/mcp", "user-token-value-123")
    path = xdg.config / "connections.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "super-secret-credential-value" not in text and "user-token-value-123" not in text
    assert (
        "secret" not in (xdg.config / "config.toml").read_text()
        if (xdg.config / "config.toml").exists()
        else True
    )
    assert json.loads(text)["schema_version"] == 1


def test_every_mcp_endpoint_is_modelled_uniformly(xdg: XdgPaths) -> None:
    profile = _add_profile(xdg, "team")
    entry = add_mcp(xdg, "tools", "https://mcp.example/mcp/", None)
    entries = ConnectionRegistry(xdg).load().entries()
    assert [(e.id, e.name, e.kind, e.ownership, e.url) for e in entries] == [
        (
            f"{profile.id}:context",
            "team-context",
            "ivoai-context",
            "ivoai",
            "http://127.0.0.1:9/v1/mcp/context",
        ),
        (f"{profile.id}:memory", "team-memory", "ivoai-memory", "ivoai", "http://127.0.0.1:9/v1/memory/mcp"),
        (entry.id, "tools", "user", "user", "https://mcp.example/mcp"),
    ]
    assert entries[1].scopes == ("memory:read", "memory:write")
    assert all(e.transport == "streamable-http" and e.enabled for e in entries)
    assert entries[2].secret_id is None


def test_disable_keeps_the_credential_and_remove_deletes_it(xdg: XdgPaths, cli: CliRunner) -> None:
    profile = _add_profile(xdg, "team")
    set_enabled(xdg, "team", False)
    assert SecretsStore(xdg).get(profile.id) is not None
    assert ConnectionRegistry(xdg).load().server("team").enabled is False
    result = cli("disconnect", "server", "team")
    assert result.code == 0
    assert SecretsStore(xdg).get(profile.id) is None
    with pytest.raises(NotFoundError):
        ConnectionRegistry(xdg).load().server("team")


def test_mcp_add_takes_its_token_from_stdin_and_refuses_duplicates(xdg: XdgPaths) -> None:
    entry = add_mcp(xdg, "tools", "https://mcp.example/mcp", "tok-123456")
    assert SecretsStore(xdg).get(entry.id) == "tok-123456"
    with pytest.raises(ConflictError):
        add_mcp(xdg, "tools", "https://other.example/mcp", None)
    remove_mcp(xdg, "tools")
    assert list_mcp(xdg) == [] and SecretsStore(xdg).get(entry.id) is None


def test_disconnect_all_removes_every_ivoai_connection_and_secret(xdg: XdgPaths, cli: CliRunner) -> None:
    a = _add_profile(xdg, "a")
    m = add_mcp(xdg, "tools", "https://mcp.example/mcp", "tok-123456")
    result = cli("disconnect", "--all", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["removed"] == {"servers": ["a"], "mcp": ["tools"], "official": []}
    assert SecretsStore(xdg).ids() == [] and a.id and m.id
    assert disconnect_all(xdg) == {"servers": [], "mcp": [], "official": []}


def test_concurrent_processes_never_lose_each_others_entries(xdg: XdgPaths) -> None:
    code = (
        "import sys; from ivoai.common.paths import xdg_paths; "
        "from ivoai.client.connections.manage import add_mcp; "
        "[add_mcp(xdg_paths(), f'm{sys.argv[1]}-{i}', 'https://x.example/mcp', None) for i in range(5)]"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n)], env=dict(os.environ)) for n in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    assert len(list_mcp(xdg)) == 20


def test_a_newer_registry_schema_fails_closed(xdg: XdgPaths) -> None:
    _add_profile(xdg, "a")
    path = xdg.config / "connections.json"
    doc = json.loads(path.read_text())
    doc["schema_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match="newer than this ivoai"):
        ConnectionRegistry(xdg).load()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://example.com", "plaintext http"),
        ("ftp://example.com", "https://"),
        ("https://user:pw@example.com", "user information"),
        ("https://example.com/?code=x", "query or fragment"),
        ("https://", "https://"),
    ],
)
def test_server_urls_must_be_https_or_loopback_and_carry_no_secrets(url: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        normalize_server_url(url)


def test_loopback_plaintext_is_accepted_and_normalized() -> None:
    assert normalize_server_url("HTTP://127.0.0.1:7744/") == "http://127.0.0.1:7744"
    assert normalize_server_url("http://[::1]:80/base/") == "http://[::1]/base"
    assert normalize_server_url("https://ai.example.com:443") == "https://ai.example.com"


def test_server_add_without_stdin_or_terminal_never_takes_the_code_from_argv(cli: CliRunner) -> None:
    result = cli("connect", "server", "add", "team", "--url", "http://127.0.0.1:9")
    assert result.code == 2
    assert "--code-stdin" in result.err
    result = cli("connect", "server", "add", "team", "--url", "http://127.0.0.1:9", "--code", "abc")
    assert result.code == 2  # there is no option that would put a code in argv


def test_server_list_json_shows_not_probed(xdg: XdgPaths, cli: CliRunner) -> None:
    _add_profile(xdg, "team")
    result = cli("connect", "server", "list", "--json")
    assert result.code == 0
    (server,) = json.loads(result.out)["servers"]
    assert server["probe"] == "not_probed" and server["alias"] == "team" and "credential" not in server


def test_mcp_add_cli_reads_the_token_from_stdin_and_lists_it_uniformly(
    xdg: XdgPaths, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("user-token-from-stdin\n"))
    added = cli("connect", "mcp", "add", "tools", "https://mcp.example/mcp", "--token-stdin", "--json")
    assert added.code == 0, added.err
    entry = json.loads(added.out)
    assert entry["auth"] == "bearer" and "user-token-from-stdin" not in added.out + added.err
    assert SecretsStore(xdg).get(entry["id"]) == "user-token-from-stdin"
    _add_profile(xdg, "team")
    listed = json.loads(cli("connect", "mcp", "list", "--json").out)["entries"]
    assert [(e["name"], e["ownership"], e["authenticated"]) for e in listed] == [
        ("team-context", "ivoai", True),
        ("team-memory", "ivoai", True),
        ("tools", "user", True),
    ]
    assert cli("connect", "mcp", "disable", "tools").code == 0
    assert cli("connect", "server", "disable", "team").code == 0
    listed = json.loads(cli("connect", "mcp", "list", "--json").out)["entries"]
    assert [e["enabled"] for e in listed] == [False, False, False]


def test_invalid_names_and_priorities_name_the_field_and_rule(
    xdg: XdgPaths, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("code\n"))
    result = cli("connect", "server", "add", "Bad Alias", "--url", "http://127.0.0.1:9", "--code-stdin")
    assert result.code == 1 and "alias 'Bad Alias' is invalid" in result.err
    monkeypatch.setattr(sys, "stdin", io.StringIO("code\n"))
    result = cli(
        "connect", "server", "add", "ok", "--url", "http://127.0.0.1:9", "--priority", "-1", "--code-stdin"
    )
    assert result.code == 1 and "priority -1 is out of range" in result.err
    monkeypatch.setattr(sys, "stdin", io.StringIO("code\n"))
    result = cli("connect", "server", "add", "ok", "--url", "http://ai.example.com", "--code-stdin")
    assert result.code == 1 and "plaintext http" in result.err
