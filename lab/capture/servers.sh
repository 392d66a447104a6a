#!/usr/bin/env bash
# make capture-fixtures needs a PostgreSQL and a MariaDB server binary (Debian
# packages postgresql and mariadb-server). Install them when missing and root;
# otherwise say how. The packages' own services are not started here: the
# capture starts its own servers on 127.0.0.1 in temporary directories.
set -eu
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v mariadbd >/dev/null 2>&1 || missing+=(mariadb-server)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "capture: missing Debian packages: ${missing[*]}" >&2
  echo "         install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "==> installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
