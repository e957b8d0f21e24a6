#!/bin/sh
# The container's entrypoint. It starts as root for one thing only: to read the master
# key from a mounted secret. Docker and Compose mount a secret file with the host's
# owner and mode, so the service user may not be able to read it (0600, another uid),
# and at 0644 chainkeys would rightly refuse it as a key file. The key is handed to
# chainkeys as CHAINKEYS_MASTER_KEY (the environment provider: never written anywhere
# in the container), then the command runs as the service user, with no capabilities.
# Started as another user already (`docker run --user …`), it only runs the command.
set -eu
user="${CHAINKEYS_RUN_AS:-chainkeys}"
secret="${CHAINKEYS_MASTER_KEY_SECRET:-}"
unset CHAINKEYS_MASTER_KEY_SECRET CHAINKEYS_RUN_AS
if [ -n "$secret" ]; then
  if [ ! -f "$secret" ]; then
    echo "chainkeys: the master key secret $secret is not there; create it (see compose.yaml)" >&2
    exit 2
  fi
  if ! CHAINKEYS_MASTER_KEY="$(cat "$secret")"; then
    echo "chainkeys: the master key secret $secret cannot be read by uid $(id -u)" >&2
    exit 2
  fi
  export CHAINKEYS_MASTER_KEY
fi
if [ "$(id -u)" = 0 ]; then
  exec setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --inh-caps=-all \
    --bounding-set=-all -- "$@"
fi
exec "$@"
