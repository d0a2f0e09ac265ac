#!/usr/bin/env bash
# Debian's haproxy and docker-compose, for the deployment files' tests (tests/deploy/: `haproxy -c` on
# deploy/haproxy/haproxy.cfg, `docker-compose config` on docker-compose.yml) and scripts/fleet.py (HAProxy in
# front of the replicas). Neither needs a Docker engine. A no-op when both are installed.
set -euo pipefail
missing=()
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
bash "$(dirname "$0")/apt-install.sh" install-fleet-tools --no-install-recommends "${missing[@]}"
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$HAPROXY" ] || { echo "install-fleet-tools: haproxy is still missing after apt-get install" >&2; exit 1; }
command -v docker-compose >/dev/null 2>&1 \
  || { echo "install-fleet-tools: docker-compose is still missing after apt-get install" >&2; exit 1; }
"$HAPROXY" -v | sed -n 1p
docker-compose version | sed -n 1p
