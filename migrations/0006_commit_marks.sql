-- additive: no (version 5 reads the high-water mark from last_seq alone, which version 6 commits skip)
-- pico-edge session schema, version 6: the commit high-water mark rides on rows a commit writes anyway
-- (issue 15, §3.3, §7.4 recovery rule 4, §7.5). Updating session_metadata's last_seq cost one billed row
-- per commit. Now the newest row of entries, tasks and list_elements carries its commit's last sequence
-- in `last` (NULL when its own id is that last sequence), and a patch sets `last` on the live task it
-- rewrites (same row, no index touched). Open takes the largest of: last_seq, the newest row of each of
-- those three tables (one row each by rowid), the live tasks' `last` (the partial index tasks_live), and
-- the newest scratch seq. Only a commit that writes none of those rows (a settlement alone, a value set,
-- a deletion, a conversation change, a scratch clear) still records last_seq. Columns added without a
-- rewrite; rows written by earlier versions keep NULL and the last_seq their commits recorded.
ALTER TABLE entries ADD COLUMN last INTEGER;
ALTER TABLE tasks ADD COLUMN last INTEGER;
ALTER TABLE list_elements ADD COLUMN last INTEGER;
