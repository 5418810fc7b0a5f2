#!/usr/bin/env bash
# A local Spark standalone cluster for flinkwatch: one master and N workers, started from
# the venv's pinned pyspark (`pyspark/bin/spark-class`), so the cluster runs exactly the
# Spark version the job was built against. Every daemon gets its own process group: `down`
# (or a SIGKILL of that group) takes a worker's executor JVM and Python workers with it.
#
#   scripts/spark-cluster.sh up       start the master and the workers; prints the master URL
#   scripts/spark-cluster.sh down     stop them (`down --purge` also deletes logs and work dirs)
#   scripts/spark-cluster.sh status   the master URL and which daemons are running
#   scripts/spark-cluster.sh url      print the master URL
#
# Then: `flinkwatch run --config FILE` with `spark.master: spark://127.0.0.1:7077` in FILE
# (client mode: the flinkwatch process is the driver).
#
# Environment (all optional):
#   FLINKWATCH_STACK_DIR        as in scripts/stack.sh                        (default: <repo>/.stack)
#   FLINKWATCH_SPARK_HOST       bind address of every daemon                  (default: 127.0.0.1)
#   FLINKWATCH_SPARK_PORT       master RPC port                               (default: 7077)
#   FLINKWATCH_SPARK_UI_PORT    master web UI; worker i's is this + i         (default: 8080)
#   FLINKWATCH_SPARK_WORKERS    number of workers                             (default: 2)
#   FLINKWATCH_WORKER_CORES     cores each worker offers                      (default: 1)
#   FLINKWATCH_WORKER_MEMORY    memory each worker offers to executors        (default: 1g)
#   FLINKWATCH_SPARK_DIR        pid files, logs, work and scratch dirs        (default: $FLINKWATCH_STACK_DIR/spark-<port>)
#   SPARK_DAEMON_MEMORY         heap of the master and worker daemons         (default: 256m)
#   SPARK_DAEMON_JAVA_OPTS      more JVM options of the master and workers (Spark's own)
#   PYTHON                      interpreter with flinkwatch and pyspark       (default: <repo>/.venv/bin/python)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
stack=${FLINKWATCH_STACK_DIR:-$repo/.stack}
host=${FLINKWATCH_SPARK_HOST:-127.0.0.1}
port=${FLINKWATCH_SPARK_PORT:-7077}
ui_port=${FLINKWATCH_SPARK_UI_PORT:-8080}
workers=${FLINKWATCH_SPARK_WORKERS:-2}
cores=${FLINKWATCH_WORKER_CORES:-1}
memory=${FLINKWATCH_WORKER_MEMORY:-1g}
python=${PYTHON:-$repo/.venv/bin/python}
dir=${FLINKWATCH_SPARK_DIR:-$stack/spark-$port}
url=spark://$host:$port

say() { printf '[spark-cluster] %s\n' "$*" >&2; }

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

# A daemon in a session (and process group) of its own; spark-class execs the JVM, so the
# pid written is the JVM's and the group's.
start_daemon() {  # start_daemon NAME CLASS ARGS...
  local name=$1 class=$2
  shift 2
  local pidfile=$dir/$name.pid
  if running "$pidfile"; then
    say "$name: already running (pid $(cat "$pidfile"))"
    return
  fi
  mkdir -p "$dir/$name/local"
  SPARK_LOCAL_DIRS="$dir/$name/local" setsid nohup "$spark_home/bin/spark-class" "$class" "$@" \
    > "$dir/$name.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
}

up() {
  local spark_home
  spark_home=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  export SPARK_HOME=$spark_home SPARK_LOCAL_IP=$host PYSPARK_PYTHON=$python
  export SPARK_DAEMON_MEMORY=${SPARK_DAEMON_MEMORY:-256m}
  mkdir -p "$dir"
  if ! running "$dir/master.pid" && port_open "$port"; then
    say "master: port $port is taken by another process; set FLINKWATCH_SPARK_PORT"
    exit 1
  fi
  say "master: starting on $url (web UI $host:$ui_port, logs in $dir)"
  start_daemon master org.apache.spark.deploy.master.Master \
    --host "$host" --port "$port" --webui-port "$ui_port"
  for _ in $(seq 1 120); do
    port_open "$port" && break
    running "$dir/master.pid" || { say "master: exited; see $dir/master.log"; tail -n 20 "$dir/master.log" >&2; exit 1; }
    sleep 0.5
  done
  port_open "$port" || { say "master: did not open port $port within 60 s"; exit 1; }
  local i
  for i in $(seq 1 "$workers"); do
    # RPC port 0: the OS picks a free one; the web UI port is fixed so that an executor's
    # log URL (in the driver's REST API) names its worker.
    start_daemon "worker-$i" org.apache.spark.deploy.worker.Worker \
      --host "$host" --port 0 --webui-port $((ui_port + i)) \
      --cores "$cores" --memory "$memory" --work-dir "$dir/worker-$i/work" "$url"
  done
  for i in $(seq 1 "$workers"); do
    for _ in $(seq 1 120); do
      grep -q "Successfully registered with master" "$dir/worker-$i.log" 2>/dev/null && break
      running "$dir/worker-$i.pid" || { say "worker-$i: exited; see $dir/worker-$i.log"; tail -n 20 "$dir/worker-$i.log" >&2; exit 1; }
      sleep 0.5
    done
    grep -q "Successfully registered with master" "$dir/worker-$i.log" \
      || { say "worker-$i: not registered within 60 s; see $dir/worker-$i.log"; exit 1; }
    say "worker-$i: registered ($cores cores, $memory; pid $(cat "$dir/worker-$i.pid"), web UI $host:$((ui_port + i)))"
  done
  echo "$url"
}

stop_daemon() {  # stop_daemon NAME: SIGTERM to its process group, SIGKILL after 15 s
  local pidfile=$dir/$1.pid pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    say "$1: stopping (process group $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  # The executors and Python workers of a worker are in its group: none may outlive it.
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

down() {
  local f
  for f in "$dir"/worker-*.pid; do
    [ -e "$f" ] && stop_daemon "$(basename "$f" .pid)"
  done
  stop_daemon master
  if [ "${1:-}" = "--purge" ]; then
    say "deleting $dir"
    rm -rf "$dir"
  fi
}

status() {
  local f rc=0
  if running "$dir/master.pid"; then
    say "master: running (pid $(cat "$dir/master.pid")) at $url, web UI $host:$ui_port"
  else
    say "master: not running"
    rc=3
  fi
  for f in "$dir"/worker-*.pid; do
    [ -e "$f" ] || continue
    if running "$f"; then
      say "$(basename "$f" .pid): running (pid $(cat "$f"))"
    else
      say "$(basename "$f" .pid): not running"
    fi
  done
  [ "$rc" = 0 ] && echo "$url"
  return "$rc"
}

case "${1:-}" in
  up) up ;;
  down) shift; down "${1:-}" ;;
  status) status ;;
  url) echo "$url" ;;
  *) echo "usage: $0 up|down [--purge]|status|url" >&2; exit 2 ;;
esac
