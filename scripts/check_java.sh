#!/usr/bin/env bash
# Spark (PySpark) needs Java 17. Say how to get it instead of failing later.
set -u
if ! command -v java >/dev/null 2>&1; then
  echo "vcmt: Java 17 is required for Spark but 'java' was not found." >&2
  echo "      Install it with: sudo apt-get update && sudo apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
  echo "vcmt: Java 17 is required for Spark; found '$(java -version 2>&1 | head -n1)'." >&2
  echo "      Install it with: sudo apt-get update && sudo apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
