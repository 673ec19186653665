#!/usr/bin/env bash
# A local OpenSearch cluster for cogr's OpenSearch backend (docs/opensearch.md).
#
#   scripts/opensearch.sh install                     download + verify the pinned distribution (cached)
#   scripts/opensearch.sh start  --dir D [--nodes 3] [--port 9200] [--heap 512m] [--timeout 600]
#   scripts/opensearch.sh stop   --dir D [--timeout 120]   SIGTERM every node, wait for them to exit
#   scripts/opensearch.sh kill   --dir D --node I          SIGKILL node I (0-based), the cluster goes on
#   scripts/opensearch.sh restart --dir D --node I [--timeout 600]   start a killed node again
#   scripts/opensearch.sh status --dir D                   nodes, pids, ports, health
#
# The distribution is Maven Central's org.opensearch.distribution.integ-test-zip:opensearch:3.6.0
# (no plugins, no security, no bundled JDK), checked against the SHA-256 pinned below, unpacked once
# into $COGR_OPENSEARCH_CACHE (default ~/.cache/cogr/opensearch). It needs Java 21+:
# $OPENSEARCH_JAVA_HOME, else the first JDK 21+ found under /usr/lib/jvm or /opt, else `java` on PATH.
#
# Every node binds to 127.0.0.1 only (HTTP port P+i, transport port P+100+i), is manager-eligible
# (N nodes, one cluster, the initial managers all of them) and has its own directory D/node-I
# (config, data, logs; jvm.options' relative paths pointed there). OpenSearch refuses to run as
# root: run as root, the nodes run as uid/gid 65534 through setpriv, their directories chowned to it,
# the distribution hard-linked (or copied) into D/dist so that user can read it.
# Logs: D/node-I/logs/ (the node's log, gc.log) and D/node-I/stdout.log.
set -euo pipefail

OS_VERSION=3.6.0
OS_SHA256=a91faa1dc1cadc78cb278b4f63847e19e1627a4e9de698e14e7efc14ee37b286
OS_URL="https://repo1.maven.org/maven2/org/opensearch/distribution/integ-test-zip/opensearch/${OS_VERSION}/opensearch-${OS_VERSION}.zip"
CACHE="${COGR_OPENSEARCH_CACHE:-$HOME/.cache/cogr/opensearch}"
HOME_DIR="$CACHE/opensearch-$OS_VERSION"
RUN_UID=65534
RUN_GID=65534

die() {
  echo "opensearch.sh: $*" >&2
  exit 1
}
log() { echo "opensearch.sh: $*" >&2; }

install_dist() {
  if [ -f "$HOME_DIR/.cogr-verified" ]; then
    echo "$HOME_DIR"
    return
  fi
  command -v curl >/dev/null || die "curl is missing (needed to download $OS_URL)"
  mkdir -p "$CACHE"
  local zip="$CACHE/opensearch-$OS_VERSION.zip"
  if [ ! -f "$zip" ] || ! echo "$OS_SHA256  $zip" | sha256sum -c --status; then
    log "downloading $OS_URL (162 MB) into $CACHE"
    rm -f "$zip.part"
    curl -fSL --retry 3 --connect-timeout 30 --max-time 1800 -o "$zip.part" "$OS_URL" || die "download failed: $OS_URL"
    if ! echo "$OS_SHA256  $zip.part" | sha256sum -c --status; then
      got=$(sha256sum "$zip.part" | cut -d' ' -f1)
      rm -f "$zip.part"
      die "$OS_URL: SHA-256 $got is not the pinned $OS_SHA256 (download removed; run install again)"
    fi
    mv "$zip.part" "$zip"
  fi
  rm -rf "$HOME_DIR.partial"
  mkdir -p "$HOME_DIR.partial"
  if command -v unzip >/dev/null; then
    unzip -q "$zip" -d "$HOME_DIR.partial"
  elif command -v python3 >/dev/null; then
    python3 -m zipfile -e "$zip" "$HOME_DIR.partial"
  else
    die "neither unzip nor python3 is here to unpack $zip"
  fi
  # Unpackers other than unzip drop the executable bits.
  chmod a+x "$HOME_DIR.partial/opensearch-$OS_VERSION"/bin/*
  rm -rf "$HOME_DIR"
  mv "$HOME_DIR.partial/opensearch-$OS_VERSION" "$HOME_DIR"
  rmdir "$HOME_DIR.partial"
  chmod -R a+rX "$HOME_DIR"
  touch "$HOME_DIR/.cogr-verified"
  log "OpenSearch $OS_VERSION verified (SHA-256 $OS_SHA256) and unpacked in $HOME_DIR"
  echo "$HOME_DIR"
}

java_home() {
  if [ -n "${OPENSEARCH_JAVA_HOME:-}" ]; then
    echo "$OPENSEARCH_JAVA_HOME"
    return
  fi
  local j v
  for j in /usr/lib/jvm/* /opt/*jdk* /opt/java/*; do
    [ -x "$j/bin/java" ] || continue
    v=$("$j/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
    if [ -n "$v" ] && [ "${v%%.*}" -ge 21 ] 2>/dev/null; then
      echo "$j"
      return
    fi
  done
  if command -v java >/dev/null; then
    j=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
    v=$("$j/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
    if [ -n "$v" ] && [ "${v%%.*}" -ge 21 ] 2>/dev/null; then
      echo "$j"
      return
    fi
  fi
  die "OpenSearch $OS_VERSION needs Java 21 or newer: set OPENSEARCH_JAVA_HOME (none found under /usr/lib/jvm or /opt)"
}

# Arguments
CMD="${1:-}"
[ -n "$CMD" ] || die "usage: scripts/opensearch.sh install|start|stop|kill|restart|status [--dir D] [--nodes N] [--node I] [--port P] [--heap 512m] [--timeout S]"
shift
DIR=""
NODES=3
NODE=""
PORT=9200
HEAP=512m
TIMEOUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="${2:?--dir needs a folder}" && shift 2 ;;
    --nodes) NODES="${2:?--nodes needs a number}" && shift 2 ;;
    --node) NODE="${2:?--node needs a number}" && shift 2 ;;
    --port) PORT="${2:?--port needs a number}" && shift 2 ;;
    --heap) HEAP="${2:?--heap needs a size such as 512m}" && shift 2 ;;
    --timeout) TIMEOUT="${2:?--timeout needs seconds}" && shift 2 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || die "--nodes: expected 1 to 99, got '$NODES'"
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65000 ] || die "--port: expected 1024 to 65000, got '$PORT'"
[[ "$HEAP" =~ ^[0-9]+[mg]$ ]] || die "--heap: expected a size such as 512m or 1g, got '$HEAP'"
[ -z "$TIMEOUT" ] || [[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "--timeout: expected seconds, got '$TIMEOUT'"
[ -z "$NODE" ] || [[ "$NODE" =~ ^[0-9]+$ ]] || die "--node: expected a node number, got '$NODE'"

need_dir() {
  [ -n "$DIR" ] || die "$CMD: --dir D is required (the cluster's folder)"
  DIR=$(readlink -f "$DIR")
}

# The cluster's recorded settings (written by start).
read_cluster() {
  [ -f "$DIR/cluster.env" ] || die "$DIR: no cluster here (no cluster.env; run start first)"
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
}

node_pid() {
  local f="$DIR/node-$1/pid"
  [ -f "$f" ] || return 1
  local p
  p=$(cat "$f")
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

# GET a URL with a deadline; prints the body, fails on a connection error or timeout.
http_get() { curl -fsS --connect-timeout 2 --max-time "${2:-5}" "$1"; }

wait_health() {
  local status="$1" deadline=$(($(date +%s) + $2)) ports="$3" p body
  while [ "$(date +%s)" -lt "$deadline" ]; do
    for ((i = 0; i < NODES; i++)); do
      if [ -f "$DIR/node-$i/pid" ] && ! node_pid "$i" >/dev/null; then
        log "node $i exited; the end of $DIR/node-$i/stdout.log:"
        tail -n 20 "$DIR/node-$i/stdout.log" >&2 || true
        return 1
      fi
    done
    for p in $ports; do
      body=$(http_get "http://127.0.0.1:$p/_cluster/health?wait_for_status=$status&wait_for_nodes=$NODES&timeout=5s" 10 2>/dev/null || true)
      if [[ "$body" == *"\"timed_out\":false"* ]]; then
        echo "$body"
        return 0
      fi
    done
    sleep 2
  done
  return 1
}

start_node() {
  local i="$1" nd="$DIR/node-$i" java="$2"
  if node_pid "$i" >/dev/null; then
    log "node $i already runs (pid $(node_pid "$i"))"
    return
  fi
  local run=()
  if [ "$(id -u)" = "0" ]; then
    chown -R "$RUN_UID:$RUN_GID" "$nd"
    run=(setpriv "--reuid=$RUN_UID" "--regid=$RUN_GID" --clear-groups)
  fi
  # Its own session (setsid), so a kill reaches the JVM and not the caller.
  (
    cd "$DIST"
    export OPENSEARCH_JAVA_HOME="$java" OPENSEARCH_PATH_CONF="$nd/config" OPENSEARCH_TMPDIR="$nd/tmp" HOME="$nd"
    exec setsid "${run[@]}" "$DIST/bin/opensearch" -p "$nd/pid.os" >"$nd/stdout.log" 2>&1 </dev/null
  ) &
  echo $! >"$nd/pid"
  log "node $i: pid $(cat "$nd/pid"), http 127.0.0.1:$((PORT + i)), logs $nd/logs and $nd/stdout.log"
}

case "$CMD" in
  install)
    install_dist >/dev/null
    echo "$HOME_DIR"
    ;;
  start)
    need_dir
    SRC=$(install_dist)
    JAVA=$(java_home)
    mkdir -p "$DIR"
    if [ -f "$DIR/cluster.env" ]; then
      . "$DIR/cluster.env"
    else
      printf 'NODES=%s\nPORT=%s\nHEAP=%s\n' "$NODES" "$PORT" "$HEAP" >"$DIR/cluster.env"
    fi
    DIST="$SRC"
    if [ "$(id -u)" = "0" ]; then
      # The node user cannot read root's home: a hard-linked (else copied) tree in the cluster's folder.
      DIST="$DIR/dist"
      [ -d "$DIST" ] || cp -al "$SRC" "$DIST" 2>/dev/null || cp -a "$SRC" "$DIST"
      chmod 755 "$DIR"
      setpriv "--reuid=$RUN_UID" "--regid=$RUN_GID" --clear-groups test -x "$DIST/bin/opensearch" ||
        die "uid $RUN_UID cannot reach $DIST/bin/opensearch: a folder above $DIR is not searchable by others (a mkdtemp folder is 0700): chmod o+x it"
    fi
    hosts="" managers=""
    for ((i = 0; i < NODES; i++)); do
      hosts="$hosts${hosts:+, }\"127.0.0.1:$((PORT + 100 + i))\""
      managers="$managers${managers:+, }\"node-$i\""
    done
    for ((i = 0; i < NODES; i++)); do
      nd="$DIR/node-$i"
      if [ ! -d "$nd/config" ]; then
        mkdir -p "$nd/data" "$nd/logs" "$nd/tmp"
        cp -r "$SRC/config" "$nd/config"
        # jvm.options' relative paths (gc log, heap dumps, error file, agent) point into the node's folder.
        sed -i \
          -e "s|-XX:HeapDumpPath=data|-XX:HeapDumpPath=$nd/data|" \
          -e "s|-XX:ErrorFile=logs/|-XX:ErrorFile=$nd/logs/|" \
          -e "s|file=logs/gc.log|file=$nd/logs/gc.log|" \
          -e "s|-Xloggc:logs/gc.log|-Xloggc:$nd/logs/gc.log|" \
          -e "s|-javaagent:agent/|-javaagent:$DIST/agent/|" \
          -e "s|^-Xms1g|-Xms$HEAP|" -e "s|^-Xmx1g|-Xmx$HEAP|" \
          "$nd/config/jvm.options"
        cat >"$nd/config/opensearch.yml" <<EOF
cluster.name: cogr-local
node.name: node-$i
node.roles: [cluster_manager, data, ingest]
path.data: $nd/data
path.logs: $nd/logs
network.host: 127.0.0.1
http.port: $((PORT + i))
transport.port: $((PORT + 100 + i))
discovery.seed_hosts: [$hosts]
cluster.initial_cluster_manager_nodes: [$managers]
action.destructive_requires_name: true
# Disk watermarks as free space, not as a share of the disk: a local cluster on a large
# shared disk (90 % used by others, tens of GB free) must still allocate replicas.
cluster.routing.allocation.disk.watermark.low: 2gb
cluster.routing.allocation.disk.watermark.high: 1gb
cluster.routing.allocation.disk.watermark.flood_stage: 512mb
EOF
      fi
    done
    for ((i = 0; i < NODES; i++)); do start_node "$i" "$JAVA"; done
    ports=$(for ((i = 0; i < NODES; i++)); do echo $((PORT + i)); done)
    if ! out=$(wait_health green "${TIMEOUT:-600}" "$ports"); then
      die "the cluster in $DIR is not green after ${TIMEOUT:-600} s; logs: $DIR/node-*/logs, $DIR/node-*/stdout.log"
    fi
    log "green: $out"
    log "nodes: $(for p in $ports; do printf 'http://127.0.0.1:%s ' "$p"; done); logs: $DIR/node-*/logs"
    for p in $ports; do printf 'http://127.0.0.1:%s\n' "$p"; done
    ;;
  restart)
    need_dir
    read_cluster
    [ -n "$NODE" ] && [ "$NODE" -lt "$NODES" ] || die "restart: --node I is required, 0 to $((NODES - 1))"
    SRC=$(install_dist)
    DIST="$SRC"
    [ "$(id -u)" != "0" ] || DIST="$DIR/dist"
    start_node "$NODE" "$(java_home)"
    if [ -n "$TIMEOUT" ]; then
      ports=$(for ((i = 0; i < NODES; i++)); do echo $((PORT + i)); done)
      out=$(wait_health green "$TIMEOUT" "$ports") || die "not green $TIMEOUT s after restarting node $NODE; logs: $DIR/node-$NODE/logs"
      log "green: $out"
    fi
    ;;
  kill)
    need_dir
    read_cluster
    [ -n "$NODE" ] && [ "$NODE" -lt "$NODES" ] || die "kill: --node I is required, 0 to $((NODES - 1))"
    p=$(node_pid "$NODE") || die "node $NODE is not running"
    kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p"
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    rm -f "$DIR/node-$NODE/pid"
    log "node $NODE (pid $p) killed"
    ;;
  stop)
    need_dir
    read_cluster
    pids=()
    for ((i = 0; i < NODES; i++)); do
      if p=$(node_pid "$i"); then
        kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
        pids+=("$p")
      fi
    done
    deadline=$(($(date +%s) + ${TIMEOUT:-120}))
    for p in "${pids[@]}"; do
      while kill -0 "$p" 2>/dev/null; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
          log "pid $p did not stop in ${TIMEOUT:-120} s: SIGKILL"
          kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
          break
        fi
        sleep 0.5
      done
    done
    rm -f "$DIR"/node-*/pid
    log "stopped ${#pids[@]} node(s) in $DIR"
    ;;
  status)
    need_dir
    read_cluster
    for ((i = 0; i < NODES; i++)); do
      if p=$(node_pid "$i"); then echo "node-$i pid $p http://127.0.0.1:$((PORT + i))"; else echo "node-$i down"; fi
    done
    for ((i = 0; i < NODES; i++)); do
      if h=$(http_get "http://127.0.0.1:$((PORT + i))/_cluster/health" 5 2>/dev/null); then
        echo "$h"
        break
      fi
    done
    ;;
  *) die "unknown command: $CMD (install, start, stop, kill, restart, status)" ;;
esac
