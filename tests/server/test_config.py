"""The server's one configuration root: `config.toml` read once, both tables validated, handed down."""

from __future__ import annotations

from pathlib import Path

import pytest

from ivoai.common.errors import ValidationError
from ivoai.common.fsio import atomic_write
from ivoai.server.config import ServerConfig, load_config, write_default_config
from ivoai.server.context.errors import SettingsError
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir


def _data(tmp_path: Path, text: str | None = None) -> ServerDataDir:
    data = ServerDataDir(tmp_path / "srv").ensure()
    if text is not None:
        atomic_write(data.root, data.config_file, text.encode())
    return data


def test_a_missing_file_and_the_default_file_give_the_same_defaults(tmp_path: Path) -> None:
    data = _data(tmp_path)
    assert load_config(data) == ServerConfig()
    assert write_default_config(data)
    assert load_config(data) == ServerConfig()


def test_both_tables_are_read_in_one_pass(tmp_path: Path) -> None:
    data = _data(
        tmp_path,
        '[server]\nlisten = "127.0.0.1:9000"\nreingest_interval_seconds = 600\n'
        '[context]\nembedder = "tei"\nindex = "qdrant"\n',
    )
    config = load_config(data)
    assert (config.gateway.listen_port, config.gateway.reingest_interval_seconds) == (9000, 600)
    assert (config.context.embedder, config.context.index) == ("tei", "qdrant")


@pytest.mark.parametrize(
    ("text", "error", "names"),
    [
        ("[server]\nreingest_interval_seconds = true\n", ValidationError, "server.reingest_interval_seconds"),
        ('[server]\nreingest_interval_seconds = "60"\n', ValidationError, "server.reingest_interval_seconds"),
        ("[server]\nlisten = 7744\n", ValidationError, "server.listen"),
        ('[server]\ntrusted_proxies = "10.0.0.0/8"\n', ValidationError, "server.trusted_proxies"),
        ('[server]\ntrusted_proxies = ["ten"]\n', ValidationError, "server.trusted_proxies"),
        ('server = "x"\n', ValidationError, "[server] must be a table"),
        ('[context]\nembeder = "tei"\n', SettingsError, "context.embeder"),
        ('[context]\ntei_model = "' + "m" * 300 + '"\n', SettingsError, "context.tei_model"),
        ("[server\n", ValidationError, "not valid TOML"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(
    tmp_path: Path, text: str, error: type[Exception], names: str
) -> None:
    data = _data(tmp_path, text)
    with pytest.raises(error) as caught:
        load_config(data)
    assert str(data.config_file) in str(caught.value) and names in str(caught.value)


def test_the_context_service_uses_the_settings_it_is_handed_not_the_file(tmp_path: Path) -> None:
    data = _data(tmp_path, '[context]\nembedder = "tei"\nindex = "qdrant"\n')
    with ContextService.open(data, ContextSettings()) as svc:
        assert (svc.settings.embedder, svc.settings.index) == ("builtin", "edge")
    with ContextService.open(data, load_config(data).context) as svc:
        assert (svc.settings.embedder, svc.settings.index) == ("tei", "qdrant")
