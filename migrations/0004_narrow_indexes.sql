-- additive: no (drops commit_boundaries, which version 3 writes on every commit, and rebuilds scratch)
-- pico-edge session schema, version 4: fewer and narrower indexes, no per-commit boundary row (issue 15,
-- §7.5, DESIGN §2). Written to apply over any earlier shape (IF EXISTS), so a re-run is harmless.
-- Durable Object SQLite bills every row written, and every index entry inserted is one: measured, an
-- INSERT writes 1 + one row per index the row enters, an UPDATE 1 + one per index whose columns (or
-- partial-index WHERE columns) it sets; index entries removed are not counted.

-- Commit boundaries: one transaction per commit already makes a batch all-or-nothing, nothing reads the
-- table, and the last_seq compare-and-set of session_metadata records the high-water mark. One row per
-- commit saved.
DROP TABLE IF EXISTS commit_boundaries;

-- Tasks: every task by conversation (conversation-scoped scans of any role), and the live ones by
-- conversation (a partial index: a task leaves it at settlement for free). Session-wide live scans read
-- the partial index (live tasks are few) and sort; role filters apply to those rows. Status and state
-- changes touch no index; start -> inflight re-enters the partial index once.
DROP INDEX IF EXISTS tasks_by_role;
DROP INDEX IF EXISTS tasks_by_conversation_role;
DROP INDEX IF EXISTS tasks_live;
DROP INDEX IF EXISTS tasks_live_by_conversation;
CREATE INDEX IF NOT EXISTS tasks_by_conversation ON tasks (conversation, id);
CREATE INDEX tasks_live ON tasks (conversation, id) WHERE role <> 'terminal';

-- Entries by (conversation, kind, key, id) only where a key exists: a (kind, key) lookup never matches
-- a keyless entry, and most entries (user, assistant) have none.
DROP INDEX IF EXISTS entries_by_kind_key;
CREATE INDEX entries_by_kind_key ON entries (conversation, kind, key, id) WHERE key IS NOT NULL;

-- Scratch clustered on its address (WITHOUT ROWID): one row written per frame instead of two (row and
-- unique index). Scratch rows are small, transient frames and checkpoints bounded by their writers.
CREATE TABLE scratch_v4 (
  task      INTEGER NOT NULL,
  namespace TEXT NOT NULL,
  key       BLOB NOT NULL,
  keyless   INTEGER NOT NULL,
  element   INTEGER NOT NULL,
  seq       INTEGER NOT NULL,
  value     TEXT NOT NULL,
  PRIMARY KEY (task, namespace, key, keyless, element)
) WITHOUT ROWID;
INSERT INTO scratch_v4 (task, namespace, key, keyless, element, seq, value)
  SELECT task, namespace, key, keyless, element, seq, value FROM scratch;
DROP TABLE scratch;
ALTER TABLE scratch_v4 RENAME TO scratch;
