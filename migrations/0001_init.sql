-- additive: no (the first schema: there is no earlier version to read it)
-- pico-edge session schema, version 1 (pico v3 §7.5, DESIGN §2).
--
-- One session per Durable Object, so no table carries a session id. Ids are session sequence numbers
-- (§3.1) and serve as rowids. Large JSON lives in ordinary rowid tables: WITHOUT ROWID tables whose rows
-- carry ~1 KB of JSON spill to overflow pages and cost ~3x the disk (DESIGN §2). Every secondary index
-- costs one written row per insert (Cloudflare bills index rows too), so there are only the indexes the
-- query table of §7.2 needs.
--
-- Addresses (§4.1) are stored as (scope, namespace, key, keyless): scope is the conversation id for
-- conversation state and 0 for session state (conversation ids are positive); scratch has its own table.
-- The key is a BLOB of its UTF-16BE code units: scanValues orders keys as JavaScript compares strings
-- (by UTF-16 code unit), which BINARY-collated UTF-8 text does not (a key outside the Basic Multilingual
-- Plane sorts before U+FFFD in JS but after it bytewise). `keyless` tells an address without a key (1,
-- empty key) from the empty-string key (0, empty key), because NULLs are distinct in unique indexes;
-- ordered by (key, keyless), scans list "" before no key, as the memory backend does.

-- Storage version (§6.5) and the sequence high-water mark, one row each.
CREATE TABLE session_metadata (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO session_metadata (name, value) VALUES ('last_seq', 0);

-- One row per committed non-empty batch: its sequence range, and the task of a scratch batch.
CREATE TABLE commit_boundaries (
  first INTEGER PRIMARY KEY,
  last  INTEGER NOT NULL,
  task  INTEGER                  -- NULL for a main batch
);

-- Conversations (§2.5). `deleted` is the sequence of the deleteConversation: a tombstone that hides the
-- conversation but keeps it resolvable in the fork chains of conversations that inherited its entries.
CREATE TABLE conversations (
  id        INTEGER PRIMARY KEY,
  parent    INTEGER,
  parent_at INTEGER,
  owner     INTEGER,
  deleted   INTEGER
);
CREATE INDEX conversations_by_parent ON conversations (parent, id) WHERE parent IS NOT NULL;
CREATE INDEX conversations_by_owner ON conversations (owner, id) WHERE owner IS NOT NULL;

-- Distinct entry kinds, so entries store a small integer and entryKinds() reads only this table.
CREATE TABLE kinds (
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);

-- Entries (§2.1): immutable, read whole. Core fields are columns; data, model and edits are JSON.
CREATE TABLE entries (
  id           INTEGER PRIMARY KEY,
  conversation INTEGER NOT NULL,
  kind         INTEGER NOT NULL,   -- kinds.id
  key          TEXT,
  by_task      INTEGER,
  head         INTEGER,
  data         TEXT,
  model        TEXT,
  edits        TEXT
);
CREATE INDEX entries_by_conversation ON entries (conversation, id);
CREATE INDEX entries_by_kind_key ON entries (conversation, kind, key, id);
CREATE INDEX entries_heads ON entries (conversation, id) WHERE head IS NOT NULL;

-- Tasks (§5.1): current records, terminal ones included. Role and status are extracted for the indexes
-- and filters; state, after and owns are JSON.
CREATE TABLE tasks (
  id           INTEGER PRIMARY KEY,
  conversation INTEGER NOT NULL,
  kind         TEXT NOT NULL,
  role         TEXT NOT NULL,      -- start | inflight | terminal
  status       TEXT NOT NULL,
  background   INTEGER NOT NULL,   -- 0 | 1
  turn         INTEGER NOT NULL,   -- 0 | 1
  abort        INTEGER NOT NULL,   -- 0 | 1, never cleared once set
  after        TEXT NOT NULL,
  owns         TEXT,
  state        TEXT NOT NULL
);
CREATE INDEX tasks_by_role ON tasks (role, id);
CREATE INDEX tasks_by_conversation_role ON tasks (conversation, role, id);
-- Live tasks (role start or inflight) are few; these stay small however many tasks have finished.
CREATE INDEX tasks_live ON tasks (id) WHERE role <> 'terminal';
CREATE INDEX tasks_live_by_conversation ON tasks (conversation, id) WHERE role <> 'terminal';

-- Current values of session and conversation addresses, sticky and rewindable alike (the conversation's
-- own, never inherited): point reads of sticky state and scanValues. Deleting removes the row.
CREATE TABLE "values" (
  scope     INTEGER NOT NULL,      -- conversation id, 0 = session
  namespace TEXT NOT NULL,
  key       BLOB NOT NULL,
  keyless   INTEGER NOT NULL,
  seq       INTEGER NOT NULL,      -- the write that set it
  value     TEXT NOT NULL
);
CREATE UNIQUE INDEX values_by_address ON "values" (scope, namespace, key, keyless);

-- Every version of rewindable conversation values (§4.4); value NULL is a deletion tombstone.
CREATE TABLE value_versions (
  seq          INTEGER PRIMARY KEY,
  conversation INTEGER NOT NULL,
  namespace    TEXT NOT NULL,
  key          BLOB NOT NULL,
  keyless      INTEGER NOT NULL,
  value        TEXT
);
CREATE INDEX value_versions_by_address ON value_versions (conversation, namespace, key, keyless, seq);

-- List elements of session and conversation lists; id = the append's sequence. Sticky lists delete rows
-- on remove/clear; rewindable lists keep them and record markers instead. The policy is part of a list's
-- storage identity (a sticky and a rewindable list at one address never see each other's elements).
CREATE TABLE list_elements (
  id        INTEGER PRIMARY KEY,
  scope     INTEGER NOT NULL,      -- conversation id, 0 = session
  namespace TEXT NOT NULL,
  key       BLOB NOT NULL,
  keyless   INTEGER NOT NULL,
  rewind    INTEGER NOT NULL,      -- 0 | 1
  value     TEXT NOT NULL
);
CREATE INDEX list_elements_by_address ON list_elements (scope, namespace, key, keyless, rewind, id);

-- Clear (element NULL) and remove (element = the removed id) markers of rewindable conversation lists.
-- A remove written in a fork may name an inherited element, so removes are looked up by element without
-- the scope.
CREATE TABLE list_markers (
  seq          INTEGER PRIMARY KEY,
  conversation INTEGER NOT NULL,
  namespace    TEXT NOT NULL,
  key          BLOB NOT NULL,
  keyless      INTEGER NOT NULL,
  element      INTEGER
);
CREATE INDEX list_clears ON list_markers (conversation, namespace, key, keyless, seq) WHERE element IS NULL;
CREATE INDEX list_removes ON list_markers (namespace, key, keyless, element) WHERE element IS NOT NULL;

-- Scratch (§4.6): a live task's values (element 0) and list elements (element = append sequence), keyed
-- by task and address; settlement deletes WHERE task = ? in the same transaction.
CREATE TABLE scratch (
  task      INTEGER NOT NULL,
  namespace TEXT NOT NULL,
  key       BLOB NOT NULL,
  keyless   INTEGER NOT NULL,
  element   INTEGER NOT NULL,
  seq       INTEGER NOT NULL,
  value     TEXT NOT NULL
);
CREATE UNIQUE INDEX scratch_by_address ON scratch (task, namespace, key, keyless, element);
