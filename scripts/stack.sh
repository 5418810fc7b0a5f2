#!/usr/bin/env bash
# Local stack for flinkwatch: a single-node Apache Kafka broker (KRaft) and the Spark Kafka
# connector jars, both resolved from Maven Central with the project's own POMs.
#
#   scripts/stack.sh fetch    resolve jars into $FLINKWATCH_STACK_DIR/jars (cached, idempotent):
#                             the broker, the Kafka connector, S3A; builds flinkwatch's
#                             own class (streaming/jvm) and the JVM's class-data archive
#                             every local driver JVM starts from (cds/replay.jsa)
#   scripts/stack.sh fetch-servers   the same for the tests' HDFS and S3 API servers
#   scripts/stack.sh up       fetch, format storage once, start the broker, create the topics
#   scripts/stack.sh down     stop the broker (data is kept; `down --purge` deletes it)
#   scripts/stack.sh status   say whether the broker is running and where
#
# Environment (all optional):
#   FLINKWATCH_STACK_DIR   where jars, broker data and logs live   (default: <repo>/.stack)
#   FLINKWATCH_KAFKA_PORT  broker port on 127.0.0.1; port+1 is the controller's (default: 9092)
#   FLINKWATCH_KAFKA_DIR   broker data, config and logs          (default: $FLINKWATCH_STACK_DIR/kafka-<port>)
#   FLINKWATCH_TOPICS      topics to create; empty: none            (default: flink.logs flink.metrics)
#   FLINKWATCH_PARTITIONS  partitions per topic                     (default: 2)
#   FLINKWATCH_KAFKA_PROPERTIES  more server.properties lines, one a line; they win over
#                          the ones above (a test's broker defaults)  (default: none)
#   FLINKWATCH_KAFKA_JAVA_OPTS   more options for the broker's JVM (the tests' brokers:
#                          the JIT's first tier only)                (default: none)
#   PYTHON                 interpreter with flinkwatch installed    (default: <repo>/.venv/bin/python)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
stack=${FLINKWATCH_STACK_DIR:-$repo/.stack}
port=${FLINKWATCH_KAFKA_PORT:-9092}
controller_port=$((port + 1))
topics=${FLINKWATCH_TOPICS-flink.logs flink.metrics}
partitions=${FLINKWATCH_PARTITIONS:-2}
python=${PYTHON:-$repo/.venv/bin/python}
kafka_dir=${FLINKWATCH_KAFKA_DIR:-$stack/kafka-$port}
pidfile=$kafka_dir/broker.pid

say() { printf '[stack] %s\n' "$*" >&2; }

fetch_one() {  # fetch_one NAME INCLUDE_IDS [EXCLUDE_GROUP_IDS EXCLUDE_IDS]
  local name=$1 include=$2 exclude_groups=${3:-} exclude=${4:-} dest=$stack/jars/$1
  if [ -f "$dest/.complete" ]; then
    say "jars/$name: cached ($(ls "$dest"/*.jar | wc -l) jars)"
    return
  fi
  say "jars/$name: resolving from Maven Central (first run only)..."
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  local args=(-q -B -Dstyle.color=never -s "$repo/scripts/maven/settings.xml" -f "$repo/scripts/maven/$name/pom.xml"
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dest.tmp")
  [ -n "$include" ] && args+=(-DincludeArtifactIds="$include")
  [ -n "$exclude_groups" ] && args+=(-DexcludeGroupIds="$exclude_groups")
  [ -n "$exclude" ] && args+=(-DexcludeArtifactIds="$exclude")
  # Quiet (-q) Maven still writes its colour resets (ESC[0m) to the terminal: its output
  # goes to a file, shown when it fails.
  if ! mvn "${args[@]}" > "$stack/jars/$name.mvn.log" 2>&1; then
    say "jars/$name: Maven failed; its output ($stack/jars/$name.mvn.log):"
    tail -n 30 "$stack/jars/$name.mvn.log" >&2
    exit 1
  fi
  touch "$dest.tmp/.complete"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  say "jars/$name: $(ls "$dest"/*.jar | wc -l) jars in $dest"
}

fetch() {
  command -v java >/dev/null || { say "java not found: install a JDK 17"; exit 1; }
  command -v mvn >/dev/null || { say "mvn not found: install Maven"; exit 1; }
  fetch_one kafka-broker ""
  # pyspark ships Spark itself; copy only what its jars/ lacks, so no second copy of a
  # library (slf4j, lz4, snappy, scala) ends up on Spark's classpath.
  fetch_one spark-kafka "spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2"
  # Checkpoints on s3a:// (output.checkpoint_location): S3A, the AWS SDK v2 modules it needs
  # and Spark's object-store checkpoint manager, 13 MB; not netty, the logging bridges or
  # the HTTP client, which pyspark's jars/ has in newer versions.
  fetch_one hadoop-aws "" "io.netty" "slf4j-api,commons-codec,commons-logging,httpclient,httpcore"
  build_jvm
  class_archive
}

# The classes a replay's JVM loads, parsed and verified once (scripts/class_archive.py says
# what it saves), which every local driver JVM starts from: made again when the JDK,
# pyspark, the jars, the driver's class path or the script change. Without it a JVM
# starts as before, so a failure here is said, not fatal.
class_archive() {
  local dest=$stack/cds stamp
  if ! "$python" -c 'import pyspark' 2>/dev/null; then
    say "cds: no pyspark in $python yet, not made"
    return
  fi
  stamp=$({ java -version 2>&1; "$python" -c 'import pyspark; print(pyspark.__version__)'
    ls -l --time-style=+%s "$stack"/jars/*/*.jar 2>/dev/null || true
    (cd "$repo" && FLINKWATCH_STACK_DIR="$stack" PYTHONPATH="$repo" "$python" -c \
      'from streaming.session import archive_class_path; print(archive_class_path())') || true
    cat "$repo/scripts/class_archive.py"; } | sha256sum | cut -c1-16)
  if [ -f "$dest/.made-$stamp" ]; then
    say "cds: cached"
    return
  fi
  say "cds: replaying tests/data/real/expiry_2_3 to record its classes (about a minute)..."
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  if (cd "$repo" && PYTHONPATH="$repo" "$python" scripts/class_archive.py "$dest.tmp/replay.jsa" >"$dest.tmp/log" 2>&1); then
    rm -f "$dest.tmp/log" && touch "$dest.tmp/.made-$stamp"
    rm -rf "$dest" && mv "$dest.tmp" "$dest"
    say "cds: made $dest/replay.jsa ($(du -m "$dest/replay.jsa" | cut -f1) MB)"
  else
    say "cds: not made (replays start without it); see $dest.tmp/log"
  fi
}

# flinkwatch's own JVM class (streaming/jvm: Hadoop's local file system without a chmod
# process per file), compiled against the Hadoop of the installed pyspark: rebuilt when
# the source or that jar changes. Skipped before pyspark is installed.
build_jvm() {
  local src=$repo/streaming/jvm dest=$stack/jars/flinkwatch api stamp
  api=$("$python" - 2>/dev/null <<'PY'
import glob, os, pyspark
print(*glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar")))
PY
  ) || true
  if [ -z "$api" ]; then
    say "jars/flinkwatch: no pyspark in $python yet, not built"
    return
  fi
  stamp=$(cat "$src"/*.java | sha256sum | cut -c1-16)-$(basename "$api" .jar)
  if [ -f "$dest/.built-$stamp" ]; then
    say "jars/flinkwatch: cached"
    return
  fi
  command -v javac >/dev/null || { say "javac not found: install a JDK 17"; exit 1; }
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp/classes"
  javac -nowarn --release 17 -cp "$api" -d "$dest.tmp/classes" "$src"/*.java >&2
  jar cf "$dest.tmp/flinkwatch-hadoop.jar" -C "$dest.tmp/classes" .
  rm -rf "$dest.tmp/classes" && touch "$dest.tmp/.built-$stamp"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  say "jars/flinkwatch: built $dest/flinkwatch-hadoop.jar"
}

# The tests' own HDFS and S3 API servers, each a JVM of its own (never on Spark's
# classpath): 78 MB and 39 MB, for `make test` only (a demo uses neither).
fetch_servers() {
  command -v mvn >/dev/null || { say "mvn not found: install Maven"; exit 1; }
  fetch_one hdfs-minicluster ""
  fetch_one s3proxy ""
}

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

up() {
  fetch
  mkdir -p "$kafka_dir"
  if running; then
    say "kafka: already running (pid $(cat "$pidfile")) on 127.0.0.1:$port"
  else
    if port_open; then
      say "kafka: port $port is taken by another process; set FLINKWATCH_KAFKA_PORT"
      exit 1
    fi
    cat > "$kafka_dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$kafka_dir/data
num.partitions=$partitions
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.retention.hours=168
# Retention must count from arrival, not from the producer's timestamp: replayed or
# simulated history carries event times far in the past and would be deleted at once.
log.message.timestamp.type=LogAppendTime
message.max.bytes=10485760
PROPS
    # Java's Properties keeps the last of a repeated key: these win.
    if [ -n "${FLINKWATCH_KAFKA_PROPERTIES:-}" ]; then
      printf '%s\n' "$FLINKWATCH_KAFKA_PROPERTIES" >> "$kafka_dir/server.properties"
    fi
    cat > "$kafka_dir/log4j.properties" <<PROPS
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$kafka_dir/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
PROPS
    local cp="$stack/jars/kafka-broker/*"
    if [ ! -f "$kafka_dir/data/meta.properties" ]; then
      say "kafka: formatting KRaft storage in $kafka_dir/data"
      java -cp "$cp" -Dlog4j.configuration="file:$kafka_dir/log4j.properties" kafka.tools.StorageTool \
        format -t "$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)" \
        -c "$kafka_dir/server.properties" >&2
    fi
    say "kafka: starting broker on 127.0.0.1:$port (log: $kafka_dir/server.log)"
    # shellcheck disable=SC2086
    nohup java -Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true ${FLINKWATCH_KAFKA_JAVA_OPTS:-} \
      -Dlog4j.configuration="file:$kafka_dir/log4j.properties" \
      -cp "$cp" kafka.Kafka "$kafka_dir/server.properties" > "$kafka_dir/stdout.log" 2>&1 &
    echo $! > "$pidfile"
    for _ in $(seq 1 120); do
      port_open && break
      running || { say "kafka: broker exited; see $kafka_dir/stdout.log and server.log"; tail -n 20 "$kafka_dir/stdout.log" >&2; exit 1; }
      sleep 0.5
    done
    port_open || { say "kafka: broker did not open port $port within 60 s"; exit 1; }
  fi
  if [ -n "$topics" ]; then
    say "kafka: creating topics ($topics) with $partitions partitions"
    # shellcheck disable=SC2086
    "$python" -m streaming.cli kafka create-topics --bootstrap "127.0.0.1:$port" --partitions "$partitions" $topics
  fi
  say "kafka: ready at 127.0.0.1:$port"
}

down() {
  if running; then
    local pid
    pid=$(cat "$pidfile")
    say "kafka: stopping broker (pid $pid)"
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && { say "kafka: broker did not stop in 30 s; killing"; kill -9 "$pid"; }
  else
    say "kafka: not running"
  fi
  rm -f "$pidfile"
  if [ "${1:-}" = "--purge" ]; then
    say "kafka: deleting $kafka_dir"
    rm -rf "$kafka_dir"
  fi
}

status() {
  if running; then
    say "kafka: running (pid $(cat "$pidfile")) on 127.0.0.1:$port, data in $kafka_dir/data"
  else
    say "kafka: not running"
    return 3
  fi
}

case "${1:-}" in
  fetch) fetch ;;
  fetch-servers) fetch_servers ;;
  up) up ;;
  down) shift; down "${1:-}" ;;
  status) status ;;
  jars) echo "$stack/jars/spark-kafka" ;;
  *) echo "usage: $0 fetch|fetch-servers|up|down [--purge]|status|jars" >&2; exit 2 ;;
esac
