-- additive: no (live tasks are keyed on `settled`, which version 4 never sets: tasks it settles would stay live)
-- pico-edge session schema, version 5: one task index (issue 15, §5.1, §7.5). Every index entry a row
-- enters is a billed row written, and an UPDATE that sets a column of a partial index's WHERE re-enters it.
-- `settled` (the settlement's sequence, NULL while the task is live) is set once, by the settlement, so
-- the live-task index keys on it: creating a task writes 2 rows (row and index), every status change
-- (start -> inflight included) 1, and the settlement 1 (leaving the index is not billed).
-- Conversation-scoped scans of finished tasks (operator listings only) walk the table in id order.
ALTER TABLE tasks ADD COLUMN settled INTEGER;
UPDATE tasks SET settled = id WHERE role = 'terminal';
DROP INDEX IF EXISTS tasks_live;
DROP INDEX IF EXISTS tasks_by_conversation;
CREATE INDEX tasks_live ON tasks (conversation, id) WHERE settled IS NULL;
