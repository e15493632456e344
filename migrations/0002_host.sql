-- additive: yes (new tables only; code of version 1 never reads them)
-- pico-edge session schema, version 2: the session host's own bookkeeping (DESIGN §3). The core never
-- reads these tables; the SessionObject writes them synchronously through ctx.storage.sql.

-- Consecutive kills, per live task: raised before each execute/recover starts and deleted whenever an
-- invocation of the task returns, so only invocations that ended with the object killed stay counted.
-- `version` is the deployed version the count was made under: a kill across a version change (a deploy)
-- does not count. A row whose `kills` reached the bound means the task is quarantined.
CREATE TABLE host_kills (
  task    INTEGER PRIMARY KEY,
  kills   INTEGER NOT NULL,
  version TEXT NOT NULL
);

-- The session fault (§6.1 fail-stop), at most one row; alarms do not auto-drive the session while it
-- exists. An operator clears it.
CREATE TABLE host_fault (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  at      INTEGER NOT NULL,      -- host clock, ms
  task    INTEGER,
  kind    TEXT,
  method  TEXT,
  message TEXT NOT NULL
);
