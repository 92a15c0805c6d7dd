"""Child environments: PAYG keys never reach a client; probes see an allowlist only."""

from __future__ import annotations

from ivoai.client.agents.childenv import PAYG_ENV_VARS, client_env, probe_env


def test_payg_keys_are_stripped_from_the_client_and_named() -> None:
    parent = {
        "PATH": "/bin",
        "HOME": "/h",
        "OPENAI_API_KEY": "sk-x",
        "ANTHROPIC_API_KEY": "sk-ant-y",
        "TERM": "xterm",
    }
    env, stripped = client_env(parent, {"IVOAI_SESSION_ID": "ses_1"})
    assert env == {"PATH": "/bin", "HOME": "/h", "TERM": "xterm", "IVOAI_SESSION_ID": "ses_1"}
    assert stripped == ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]


def test_a_stale_knowledge_token_from_the_parent_is_not_inherited() -> None:
    env, _ = client_env({"IVOAI_KNOWLEDGE_TOKEN": "old", "PATH": "/bin"})
    assert "IVOAI_KNOWLEDGE_TOKEN" not in env
    env, _ = client_env({"IVOAI_KNOWLEDGE_TOKEN": "old"}, {"IVOAI_KNOWLEDGE_TOKEN": "new"})
    assert env["IVOAI_KNOWLEDGE_TOKEN"] == "new"


def test_probe_environment_is_an_allowlist_without_any_payg_key() -> None:
    parent = {name: "secret" for name in PAYG_ENV_VARS} | {"HOME": "/h", "EDITOR": "vim", "LANG": "C.UTF-8"}
    env = probe_env(parent)
    assert env["HOME"] == "/h" and env["LANG"] == "C.UTF-8" and env["NO_COLOR"] == "1"
    assert "EDITOR" not in env
    assert not set(env) & PAYG_ENV_VARS
    assert env["PATH"]
