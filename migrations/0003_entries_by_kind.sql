-- additive: yes (an index only; queries of version 2 read the same rows)
-- Entries of one kind in transcript order (§7.5: filters apply before limits). System-section folding
-- and "newest assistant before a boundary" read by kind alone; without this index such a read walked
-- the conversation's rows until it met one of that kind, so its cost grew with history.
CREATE INDEX entries_by_kind ON entries (conversation, kind, id);
