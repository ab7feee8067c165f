"""The store's schema, versioned: each migration runs once, in order, inside one transaction."""

from __future__ import annotations

import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: catalog, samples, stacks, reports, findings
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL,
        started_ns INTEGER NOT NULL, ended_ns INTEGER, host TEXT, command TEXT, pid INTEGER,
        gpus TEXT, price_source TEXT, tags TEXT,
        writer TEXT,          -- "pid:create_time" of the process recording a running run
        heartbeat_ns INTEGER  -- last flush
    );
    CREATE TABLE samples (
        run_id TEXT NOT NULL, ts_ns INTEGER NOT NULL, source TEXT NOT NULL,
        gpu INTEGER NOT NULL, pid INTEGER NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL
    );
    CREATE INDEX samples_run_ts ON samples (run_id, ts_ns);
    CREATE TABLE stacks (run_id TEXT NOT NULL, stack_id INTEGER NOT NULL, frames TEXT NOT NULL,
                         PRIMARY KEY (run_id, stack_id));
    CREATE TABLE stack_samples (run_id TEXT NOT NULL, ts_ns INTEGER NOT NULL, pid INTEGER NOT NULL,
                                tid INTEGER NOT NULL, state TEXT NOT NULL, stack_id INTEGER NOT NULL);
    CREATE INDEX stack_samples_run ON stack_samples (run_id, ts_ns);
    CREATE TABLE reports (run_id TEXT PRIMARY KEY, created_ns INTEGER NOT NULL, report BLOB NOT NULL);
    CREATE TABLE findings (run_id TEXT NOT NULL, code TEXT NOT NULL, severity TEXT NOT NULL,
                           title TEXT NOT NULL, rank INTEGER);
    CREATE INDEX findings_code ON findings (code);
    """,
    # 2: samples as one packed block per flush (see store/blocks.py); table `samples` stays readable
    """
    CREATE TABLE sample_blocks (
        run_id TEXT NOT NULL, first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL, n INTEGER NOT NULL,
        names TEXT NOT NULL, data BLOB NOT NULL
    );
    CREATE INDEX sample_blocks_run ON sample_blocks (run_id, last_ns);
    """,
    # 3: a trace run's content hash, so analysing the same trace again finds its run (older runs have none)
    """
    ALTER TABLE runs ADD COLUMN content_hash TEXT;
    CREATE INDEX runs_content_hash ON runs (content_hash);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


def statements(script: str) -> list[str]:
    """A migration's statements, split where SQLite says a statement ends: a ";" inside a string literal, a
    quoted name, a comment or a trigger's body does not end one."""
    found, start = [], 0
    for end, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start:end + 1]):
            found.append(script[start:end + 1].strip())
            start = end + 1
    if script[start:].strip():
        found.append(script[start:].strip())  # a last statement without its ";": SQLite says what is wrong with it
    return found


def migrate(db: sqlite3.Connection) -> None:
    """Bring the database up to ``SCHEMA_VERSION``; refuse one written by a newer gpuscope.

    A store already current is only read (no write lock). Otherwise each step re-reads the version inside
    its write transaction, so two processes opening a new store at once do not both apply it.
    """
    if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"store schema version {version} is newer than this gpuscope knows"
                                            f" ({SCHEMA_VERSION}); upgrade gpuscope")
            if version == SCHEMA_VERSION:
                db.execute("COMMIT")
                return
            for statement in statements(MIGRATIONS[version]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
