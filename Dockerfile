# syntax=docker/dockerfile:1
# chainkeys: multi-stage build. The builder installs the pinned dependencies into a
# virtual environment; the runtime image holds only that environment and keeps its
# data (SQLite, master key file) on a volume. The service runs as the non-root user
# `chainkeys`: the entrypoint starts as root only to read a mounted master-key secret
# (deploy/docker-entrypoint.sh), then drops to that user with no capabilities.
# Build with --build-arg CHAINKEYS_COMMIT=$(git rev-parse HEAD) so /version names it.
FROM python:3.11-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml requirements.lock README.md ./
COPY src ./src
RUN python -m venv /opt/chainkeys \
 && /opt/chainkeys/bin/pip install --no-compile --require-hashes -r requirements.lock \
 && /opt/chainkeys/bin/pip install --no-compile --no-deps .

FROM python:3.11-slim-bookworm
RUN groupadd --system chainkeys \
 && useradd --system --gid chainkeys --home-dir /data --shell /usr/sbin/nologin chainkeys \
 && mkdir -p /data && chown chainkeys:chainkeys /data && chmod 0700 /data
COPY --from=builder /opt/chainkeys /opt/chainkeys
COPY deploy/docker-entrypoint.sh /usr/local/bin/chainkeys-entrypoint
ARG CHAINKEYS_COMMIT=""
ENV PATH=/opt/chainkeys/bin:$PATH \
    CHAINKEYS_COMMIT=$CHAINKEYS_COMMIT \
    CHAINKEYS_DATA_DIR=/data \
    CHAINKEYS_HOST=0.0.0.0 \
    CHAINKEYS_PORT=8000 \
    CHAINKEYS_LOG_JSON=true
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/livez', timeout=2).status != 200)"]
ENTRYPOINT ["chainkeys-entrypoint", "chainkeys"]
CMD ["serve"]
