#!/usr/bin/env bash
# The main job: builds beckon and serves every shipped rule set live, one `beckon serve` per app (each app its own
# rule set, settings and database, as each is its own Segment source), until Ctrl-C or SIGTERM.
#   bossup     rules/bossup        http://127.0.0.1:8080   beckon-bossup.sqlite
#   ops        rules/ops           http://127.0.0.1:8081   beckon-ops.sqlite
#   stampbook  rules/stampbook     http://127.0.0.1:8082   beckon-stampbook.sqlite
#   firefox    campaigns/firefox   http://127.0.0.1:8083   beckon-firefox.sqlite
# Keys, per app (APP in capitals): BECKON_WRITE_KEYS_APP, BECKON_USER_SECRET_APP and BECKON_ADMIN_KEYS_APP from the
# environment, so that a user's token for one app reads nothing of another's; without them, development keys are
# used and printed (never use those in production). BossUp's conversions go to Meta's Conversions API once
# BOSSUP_META_AUTHORIZATION ("Bearer <token>") is set; until then they wait in its outbox. Databases go to
# BECKON_DATA (default ./data). docs/service.md, docs/operations.md.
# Usage: scripts/serve.sh [--debug]
set -euo pipefail
cd "$(dirname "$0")/.."
config=release
[ "${1:-}" = "--debug" ] && config=debug
scripts/install-headers.sh
echo "building beckon ($config)…"
swift build -c "$config" --product beckon > /tmp/beckon-build.log 2>&1 || { cat /tmp/beckon-build.log; exit 1; }
beckon=".build/$config/beckon"
data=${BECKON_DATA:-data}
mkdir -p "$data"
pids=()
stop() { kill -TERM "${pids[@]}" 2> /dev/null || true; wait "${pids[@]}" 2> /dev/null || true; exit 0; }
trap stop INT TERM
port=8080
for app in bossup:rules/bossup ops:rules/ops stampbook:rules/stampbook firefox:campaigns/firefox; do
  name=${app%%:*}
  upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
  keys_var=BECKON_WRITE_KEYS_$upper
  secret_var=BECKON_USER_SECRET_$upper
  keys=${!keys_var:-}
  secret=${!secret_var:-}
  if [ -z "$keys" ]; then
    keys="dev-$name-write-key"
    echo "[$name] development write key: $keys (set $keys_var for real ones)"
  fi
  if [ -z "$secret" ]; then
    secret="development-$name-secret-change-me-0123456789"
    echo "[$name] development user-token secret: $secret (set $secret_var for a real one)"
  fi
  admin_var=BECKON_ADMIN_KEYS_$upper
  admin=${!admin_var:-}
  if [ -z "$admin" ]; then
    admin="dev-$name-admin-key"
    echo "[$name] development admin key: $admin (set $admin_var for real ones)"
  fi
  BECKON_WRITE_KEYS=$keys BECKON_USER_SECRET=$secret BECKON_ADMIN_KEYS=$admin \
    "$beckon" serve "${app#*:}" --db "$data/beckon-$name.sqlite" \
    --port "$port" \
    > >(sed -u "s/^/[$name] /") 2> >(sed -u "s/^/[$name] /" >&2) &
  pids+=($!)
  port=$((port + 1))
done
wait "${pids[@]}"
