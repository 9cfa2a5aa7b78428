#!/usr/bin/env bash
# Copies the Kafka broker's jars (hack/kafka/pom.xml) and their
# dependencies from Maven Central into $1 (bin/kafka-VERSION/libs), once.
# The notification tests run it with the JDK: a single KRaft node on free
# ports of 127.0.0.1 (test/engine/notify_test.go). Needs java and mvn.
set -euo pipefail
out=$1
[[ -e $out/.complete ]] && exit 0
for tool in java mvn; do
  command -v $tool >/dev/null 2>&1 || { echo "kafka-broker: needs $tool (apt-get install openjdk-17-jre-headless maven)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out"
mvn -q -B -f "$(dirname "$0")/kafka/pom.xml" dependency:copy-dependencies -DoutputDirectory="$(cd "$out" && pwd)"
ls "$out"/kafka_2.13-*.jar >/dev/null
touch "$out/.complete"
