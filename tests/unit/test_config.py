from pathlib import Path

import pytest

from sub250.config import Settings
from sub250.errors import ConfigError


def test_defaults_and_env_overrides():
    s = Settings.from_env({"SUB250_PORT": "9001", "SUB250_HOME": "/tmp/x", "DATABASE_URL": "postgresql://h/db"})
    assert s.port == 9001
    assert s.home == Path("/tmp/x")
    assert s.database_url == "postgresql://h/db"
    assert s.models_dir == Path("/tmp/x/models")
    assert s.pgdata_dir == Path("/tmp/x/pgdata")
    assert Settings.from_env({}).port == 8250


def test_prefixed_database_url_wins_and_models_home_overrides():
    s = Settings.from_env({"DATABASE_URL": "a", "SUB250_DATABASE_URL": "b", "SUB250_MODELS_HOME": "/m"})
    assert s.database_url == "b"
    assert s.models_dir == Path("/m")


def test_bad_number_is_a_clear_error():
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"SUB250_PORT": "eighty"})
    assert "SUB250_PORT" in str(err.value) and "fix:" in str(err.value)
