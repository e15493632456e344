-- additive: no (version 6 never reads session_elements: the session-list elements stored there would vanish)
-- pico-edge session schema, version 7: small session-list elements clustered on their address (issue 15,
-- §4, §7.5, §8.2). A list_elements row costs two billed rows (the row and list_elements_by_address); a
-- row of this WITHOUT ROWID table is its own index entry, so one. Only session lists' elements whose
-- address and JSON fit well inside a b-tree cell (SqliteState routes by size, see compactElement) come
-- here: pi.usage writes one per attempt (§8.2). Larger elements stay in list_elements, because a
-- WITHOUT ROWID row over ~1 KB spills to overflow pages (DESIGN §2). Reads of a session list merge both
-- tables by id; elements written by earlier versions stay in list_elements. These rows never carry the
-- commit mark (open reads the newest row of list_elements by rowid; this table has no rowid), so a commit
-- whose only carrier would have been such an append records last_seq.
CREATE TABLE session_elements (
  namespace TEXT NOT NULL,
  key       BLOB NOT NULL,
  keyless   INTEGER NOT NULL,
  id        INTEGER NOT NULL,
  value     TEXT NOT NULL,
  PRIMARY KEY (namespace, key, keyless, id)
) WITHOUT ROWID;
