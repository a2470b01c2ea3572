#!/usr/bin/env bash
# Installs the bench's peers, idempotently, so `npm run bench` works on a fresh machine:
#   - npm packages, pinned (their newest releases need Node 22), into .bench-deps/ (gitignored);
#   - Debian's redis-server via apt, skipped when a redis-server binary is already there;
#   - pg-boss (npm) and Debian's `postgresql` for the pg-boss peer, PostgreSQL only if it is missing.
# The repo's own dependencies are installed with `npm ci` only when they are missing (a fresh
# clone where nobody ran `npm install` yet: the bench needs tsx and the emulator's own modules);
# the repo's package.json and lock file are never touched.
# Env: BENCH_SKIP_APT=1 skips apt (a machine without root); BENCH_PGBOSS=0 does not install pg-boss
# or PostgreSQL (without them the bench skips that peer and says so; `--skip pgboss` skips it
# when they are there).
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS="$PWD/.bench-deps"

NPM_PKGS=(
  "bullmq@6.7.0"
  "ioredis@5.9.3"
  "azurite@3.35.0"
  "@azure/storage-queue@12.30.0"
)
if [ "${BENCH_PGBOSS:-1}" != "0" ]; then NPM_PKGS+=("pg-boss@10.4.2"); fi

log() { echo "bench/setup: $*" >&2; }

# ---- the repo's own dependencies -------------------------------------------------------------
if [ ! -x node_modules/.bin/tsx ] || [ ! -d node_modules/better-sqlite3 ]; then
  log "the project's dependencies are missing: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

# ---- npm peers -------------------------------------------------------------------------------
have_all=1
for spec in "${NPM_PKGS[@]}"; do
  name="${spec%@*}"; want="${spec##*@}"
  got="$(node -p "try{require('$DEPS/node_modules/$name/package.json').version}catch{''}" 2>/dev/null || true)"
  if [ "$got" != "$want" ]; then have_all=0; log "$name: want $want, have ${got:-nothing}"; fi
done
if [ "$have_all" = 1 ]; then
  log "npm peers already installed in .bench-deps"
else
  mkdir -p "$DEPS"
  # Its own package.json, so npm never walks up to the repo's.
  [ -f "$DEPS/package.json" ] || echo '{ "name": "quayside-bench-deps", "private": true }' > "$DEPS/package.json"
  # None of these peers needs an install script: bullmq's msgpackr pulls msgpackr-extract only
  # as an optional native speed-up (prebuilt per-platform packages, no build), and azurite,
  # @azure/storage-queue, ioredis and pg-boss are plain JavaScript. So npm 11's default of not
  # running install scripts changes nothing; --ignore-scripts makes that explicit everywhere.
  log "installing ${NPM_PKGS[*]} into .bench-deps"
  npm install --prefix "$DEPS" --no-audit --no-fund --ignore-scripts --save-exact --loglevel=error "${NPM_PKGS[@]}"
fi

# ---- Debian packages -------------------------------------------------------------------------
apt_install() {
  if [ "${BENCH_SKIP_APT:-0}" = "1" ]; then log "BENCH_SKIP_APT=1: not installing $*"; return 0; fi
  if [ "$(id -u)" != "0" ]; then log "not root: cannot apt-get install $* (install it yourself)"; return 0; fi
  if [ ! -f /tmp/.quayside-bench-apt-updated ]; then
    apt-get update -qq && touch /tmp/.quayside-bench-apt-updated
  fi
  # policy-rc.d 101: the packages' postinst must not start system-wide servers; the bench
  # starts its own on free ports and stops them.
  local had_policy=0
  [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  if [ "$had_policy" = 0 ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null || { [ "$had_policy" = 0 ] && rm -f /usr/sbin/policy-rc.d; return 1; }
  if [ "$had_policy" = 0 ]; then rm -f /usr/sbin/policy-rc.d; fi
}

if command -v redis-server >/dev/null 2>&1; then
  log "redis-server already installed ($(redis-server --version | awk '{print $3}'))"
else
  log "installing Debian's redis-server"
  apt_install redis-server
fi

if [ "${BENCH_PGBOSS:-1}" != "0" ]; then
  if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    log "PostgreSQL already installed ($(ls -d /usr/lib/postgresql/*/ | head -1))"
  else
    log "installing Debian's postgresql"
    apt_install postgresql || log "postgresql did not install: pg-boss will be skipped"
  fi
fi
log "done"
