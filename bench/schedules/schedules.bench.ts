/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * 1,000 schedules in one session firing over a simulated day (§8.6): every schedule repeats
 * every 6 hours, offsets spread over the first interval, so the day has 4,000 occurrences. Each
 * occurrence queues its input (`nextRun`, so no model turn is measured, only the schedule). Prints the
 * SQLite rows read and written per occurrence and per alarm (one alarm per change of the earliest wake
 * time, which is when the host writes setAlarm), and the alarm count. Rows are exact; there are no
 * times here worth asserting.
 *
 * Run: npm run bench:schedules
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { createModels } from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness } from "../../src/core/harness.js";
import type { Clock } from "../../src/core/host.js";
import { erase } from "../../src/core/task-kind.js";
import { createScheduleKind, newSchedule, scheduleDefinition, type ScheduleState } from "../../src/kinds/schedule.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";

const call = BACKGROUND_CONTEXT;
const SCHEDULES = 1000;
const EVERY = 6 * 3600_000;
const DAY = 24 * 3600_000;

class StepClock implements Clock {
  t = 1_000_000_000_000;
  readonly #sleepers = new Set<{ until: number; resolve: () => void }>();
  now(): number {
    return this.t;
  }
  sleep(until: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      if (until <= this.t) return resolve();
      const s = { until, resolve };
      this.#sleepers.add(s);
      signal?.addEventListener(
        "abort",
        () => {
          this.#sleepers.delete(s);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }
  advanceTo(t: number): void {
    this.t = t;
    for (const s of [...this.#sleepers])
      if (s.until <= t) {
        this.#sleepers.delete(s);
        s.resolve();
      }
  }
}

it("1,000 schedules over a simulated day", async () => {
  void createModels;
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-schedules-${Date.now()}`));
  await runInDurableObject(stub, async (_instance, state) => {
    const storage = await SqliteStorage.open(state.storage);
    const clock = new StepClock();
    let earliest: number | undefined;
    let alarms = 0;
    const kind = createScheduleKind({ turn: defaultTurnOptions });
    const h = await Harness.open(
      storage,
      {
        taskKinds: [erase(kind)],
        host: {
          clock,
          wakeChanged: (at) => {
            if (at !== earliest) {
              earliest = at;
              if (at !== undefined) alarms += 1;
            }
          },
        },
      },
      call,
    );
    await h.attach(call);
    const t0 = clock.now();
    const created0 = { ...storage.stats };
    await h.commit((tx) => {
      for (let i = 0; i < SCHEDULES; i++) {
        const spec = {
          conversationId: h.rootId,
          input: `s${i}`,
          mode: "nextRun" as const,
          every: EVERY,
          cron: null,
          timezone: null,
        };
        tx.task(scheduleDefinition, {
          conversationId: h.rootId,
          background: true,
          state: newSchedule(spec, t0, t0 + Math.floor((i * EVERY) / SCHEDULES) + 1000),
        });
      }
    }, call);
    const created = {
      read: storage.stats.rowsRead - created0.rowsRead,
      written: storage.stats.rowsWritten - created0.rowsWritten,
    };
    const settle = async (): Promise<void> => {
      for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 0));
    };
    await settle();
    const s0 = { ...storage.stats };
    const alarms0 = alarms;
    // Wake at each earliest time (what the one alarm does), until the day is over.
    while (earliest !== undefined && earliest <= t0 + DAY) {
      clock.advanceTo(earliest);
      const before = earliest;
      for (let i = 0; i < 50 && earliest === before; i++) await settle();
    }
    const page = await storage.scanTasks({ kind: "schedule", limit: 1000 });
    const occurrences = page.items.reduce((n, t) => n + (t.state as ScheduleState & { runs: number }).runs, 0);
    const read = storage.stats.rowsRead - s0.rowsRead;
    const written = storage.stats.rowsWritten - s0.rowsWritten;
    const wakes = alarms - alarms0;
    const fmt = (n: number) => n.toFixed(1);
    console.log(
      [
        `schedules: ${SCHEDULES}, every ${EVERY / 3600_000} h, simulated day`,
        `create all (one commit):   rows read ${created.read}, written ${created.written}`,
        `occurrences fired:         ${occurrences}`,
        `alarms (earliest changes): ${wakes}`,
        `rows read / occurrence:    ${fmt(read / occurrences)}`,
        `rows written / occurrence: ${fmt(written / occurrences)}`,
        `rows read / alarm:         ${fmt(read / wakes)}`,
        `rows written / alarm:      ${fmt(written / wakes)}`,
      ].join("\n"),
    );
    expect(occurrences).toBe(SCHEDULES * 4);
    await h.close(call);
  });
});
