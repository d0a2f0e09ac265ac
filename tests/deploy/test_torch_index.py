"""Where scripts/install.sh gets torch from (scripts/torch_index.sh): PyTorch's CPU index on a machine whose pip
sources lack torch==2.13.0+cpu (it is not on PyPI), nothing extra where they hold it (this machine class's local
wheel folder). Each check is one `pip install --dry-run --no-deps` of the pin: seconds, no install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "torch_index.sh"
PYTORCH_CPU = "https://download.pytorch.org/whl/cpu"


def _pin() -> str:
    line = next(ln for ln in (REPO / "requirements" / "runtime.txt").read_text().splitlines()
                if ln.startswith("torch=="))
    return line.split()[0]


def _isolated_env(**extra: str) -> dict[str, str]:
    """pip as on a machine without our config: no pip.conf, no PIP_* variables (find-links, indexes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, **extra)
    return env


def _decide(env: dict[str, str]) -> subprocess.CompletedProcess:
    r = subprocess.run(["bash", str(SCRIPT), sys.executable], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def _local_torch_wheel() -> Path | None:
    """The pinned torch's wheel in a find-links folder of this machine's pip config, if there is one."""
    folders = os.environ.get("PIP_FIND_LINKS", "").split()
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    for m in re.finditer(r"find-links='([^']*)'", listed):
        folders += m.group(1).split()
    version = _pin().split("==", 1)[1]
    for folder in folders:
        path = Path(folder.removeprefix("file://"))
        if path.is_dir():
            for wheel in sorted(path.glob(f"torch-{version}-*.whl")):
                return wheel
    return None


def test_without_our_pip_config_torch_comes_from_the_pytorch_cpu_index():
    r = _decide(_isolated_env())
    assert r.stdout.strip() == PYTORCH_CPU, r.stderr
    assert "not on pip's configured sources" in r.stderr


@pytest.mark.skipif(_local_torch_wheel() is None, reason="this machine's pip config holds no local torch wheel")
def test_with_this_machines_pip_config_no_extra_index_is_added():
    r = _decide(dict(os.environ))
    assert r.stdout.strip() == "", r.stderr
    assert "resolves from pip's configured sources" in r.stderr


@pytest.mark.skipif(_local_torch_wheel() is None, reason="needs a local torch wheel to stand in for the index")
def test_the_printed_index_is_what_pip_then_resolves_torch_from(tmp_path):
    """The whole path off this machine, with a local PEP 503 index standing in for PyTorch's (unreachable here):
    the decision names it, and pip, given it as install.sh gives it, resolves the pin."""
    wheel = _local_torch_wheel()
    (tmp_path / "simple" / "torch").mkdir(parents=True)
    (tmp_path / "simple" / "torch" / "index.html").write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>\n')
    index = (tmp_path / "simple").as_uri()
    env = _isolated_env(SUB250_TORCH_INDEX=index)
    assert _decide(env).stdout.strip() == index
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                        "--extra-index-url", index, _pin()], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and f"Would install torch-{_pin().split('==')[1]}" in r.stdout, r.stdout + r.stderr


def test_install_sh_passes_the_decision_to_the_pip_install_that_brings_torch():
    text = (REPO / "scripts" / "install.sh").read_text()
    assert 'torch_index=$(quiet bash scripts/torch_index.sh .venv/bin/python)' in text
    assert 'torch_from=(--extra-index-url "$torch_index")' in text
    install = re.search(r'install -q -r requirements/runtime\.txt[^\n]*\\\n[^\n]*', text)
    assert install is not None and '"${torch_from[@]}"' in install.group(0)
