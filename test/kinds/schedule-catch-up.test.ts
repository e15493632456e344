/**
 * The schedule kind's catch-up decision (§8.6: "Interval and catch-up policy are in state, so a restart
 * never launches a backlog"), as a pure function of the schedule, the due occurrence and the wake time:
 * whether the due occurrence runs, how many are skipped (exact for `every`, counted up to
 * SKIPPED_COUNT_CAP for cron), and the next occurrence, always after now. The schedule over HTTP, its
 * alarm and evictions are in test/workerd/http-schedules.test.ts.
 */
import { Cron } from "croner";
import { describe, expect, it } from "vitest";
import { catchUp, ON_TIME_GRACE_MS, SKIPPED_COUNT_CAP, type ScheduleCatchUp } from "../../src/kinds/schedule.js";

const SEC = 1000;
const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const YEAR = 365 * DAY;
const T = Date.UTC(2026, 0, 5, 12, 0, 0); // a Monday, on every grid below

const every = (ms: number, policy?: ScheduleCatchUp) => ({
  every: ms,
  cron: null,
  timezone: null,
  ...(policy === undefined ? {} : { catchUp: policy }),
});
const cron = (pattern: string, policy?: ScheduleCatchUp, timezone: string | null = null) => ({
  every: null,
  cron: pattern,
  timezone,
  ...(policy === undefined ? {} : { catchUp: policy }),
});

describe("schedule catch-up", () => {
  it("every, catchUp one (and absent): the due occurrence runs once for the whole gap, the rest are counted exactly, the next is after now", () => {
    for (const spec of [every(MIN, "one"), every(MIN)]) {
      expect(catchUp(spec, T, T)).toEqual({ fire: true, skipped: 0, capped: false, next: T + MIN });
      expect(catchUp(spec, T, T + 10 * MIN + 5)).toEqual({
        fire: true,
        skipped: 10,
        capped: false,
        next: T + 11 * MIN,
      });
      expect(catchUp(spec, T, T + 10 * MIN)).toEqual({ fire: true, skipped: 10, capped: false, next: T + 11 * MIN });
    }
    // Ten years of seconds: exact, computed, not walked.
    const gap = 10 * YEAR + 500;
    expect(catchUp(every(SEC), T, T + gap)).toEqual({
      fire: true,
      skipped: Math.floor(gap / SEC),
      capped: false,
      next: T + (Math.floor(gap / SEC) + 1) * SEC,
    });
  });

  it("every, catchUp none: on time within the grace runs; a gap (later occurrences due, or later than the grace) runs nothing and counts the due one too", () => {
    expect(catchUp(every(HOUR, "none"), T, T)).toEqual({ fire: true, skipped: 0, capped: false, next: T + HOUR });
    expect(catchUp(every(HOUR, "none"), T, T + ON_TIME_GRACE_MS)).toEqual({
      fire: true,
      skipped: 0,
      capped: false,
      next: T + HOUR,
    });
    expect(catchUp(every(HOUR, "none"), T, T + ON_TIME_GRACE_MS + 1)).toEqual({
      fire: false,
      skipped: 1,
      capped: false,
      next: T + HOUR,
    });
    // Within the grace, but two later occurrences are already due: a gap.
    expect(catchUp(every(SEC, "none"), T, T + 2500)).toEqual({
      fire: false,
      skipped: 3,
      capped: false,
      next: T + 3000,
    });
    expect(catchUp(every(HOUR, "none"), T, T + 30 * DAY + 30 * MIN)).toEqual({
      fire: false,
      skipped: 721,
      capped: false,
      next: T + 721 * HOUR,
    });
  });

  it("cron: missed occurrences are counted up to the cap; past it the count is a lower bound and the next occurrence is cron's next after now", () => {
    const minutely = cron("* * * * *");
    // Exactly the cap of later occurrences due: exact.
    expect(catchUp(minutely, T, T + SKIPPED_COUNT_CAP * MIN + 30 * SEC)).toEqual({
      fire: true,
      skipped: SKIPPED_COUNT_CAP,
      capped: false,
      next: T + (SKIPPED_COUNT_CAP + 1) * MIN,
    });
    // One more: capped.
    expect(catchUp(minutely, T, T + (SKIPPED_COUNT_CAP + 1) * MIN)).toEqual({
      fire: true,
      skipped: SKIPPED_COUNT_CAP,
      capped: true,
      next: T + (SKIPPED_COUNT_CAP + 2) * MIN,
    });
    // Under "none" the due occurrence is part of the count and of its cap.
    expect(catchUp(cron("* * * * *", "none"), T, T + (SKIPPED_COUNT_CAP - 1) * MIN)).toEqual({
      fire: false,
      skipped: SKIPPED_COUNT_CAP,
      capped: false,
      next: T + SKIPPED_COUNT_CAP * MIN,
    });
    expect(catchUp(cron("* * * * *", "none"), T, T + SKIPPED_COUNT_CAP * MIN)).toEqual({
      fire: false,
      skipped: SKIPPED_COUNT_CAP,
      capped: true,
      next: T + (SKIPPED_COUNT_CAP + 1) * MIN,
    });
    // Sixty days of minutes, and ten years of seconds: one bounded decision each.
    expect(catchUp(minutely, T, T + 60 * DAY + 30 * SEC)).toEqual({
      fire: true,
      skipped: SKIPPED_COUNT_CAP,
      capped: true,
      next: T + 60 * DAY + MIN,
    });
    expect(catchUp(cron("* * * * * *"), T, T + 10 * YEAR + 500)).toEqual({
      fire: true,
      skipped: SKIPPED_COUNT_CAP,
      capped: true,
      next: T + 10 * YEAR + SEC,
    });
  });

  it("cron in a timezone across a DST change: the count and the next occurrence follow local time", () => {
    // 09:00 in Berlin every day: 08:00 UTC before the change of 29 March 2026, 07:00 UTC after it.
    const nine = cron("0 9 * * *", "one", "Europe/Berlin");
    const due = Date.UTC(2026, 2, 20, 8, 0, 0);
    const now = Date.UTC(2026, 3, 2, 12, 0, 0);
    expect(catchUp(nine, due, now)).toEqual({
      fire: true,
      skipped: 13,
      capped: false,
      next: Date.UTC(2026, 3, 3, 7, 0, 0),
    });
    expect(catchUp(cron("0 9 * * *", "none", "Europe/Berlin"), due, now)).toEqual({
      fire: false,
      skipped: 14,
      capped: false,
      next: Date.UTC(2026, 3, 3, 7, 0, 0),
    });
  });

  it("the next occurrence is always after now and after the due one, whatever the gap", () => {
    const specs = [
      every(SEC),
      every(7 * MIN + 3 * SEC, "none"),
      every(DAY),
      cron("*/5 * * * *"),
      cron("0 9 * * 1-5", "none", "Europe/Berlin"),
      cron("* * * * * *"),
    ];
    const gaps = [0, 1, 999, SEC, 59 * SEC, MIN + 1, HOUR, 3 * DAY + 17, 45 * DAY, 3 * YEAR];
    for (const spec of specs) {
      const due =
        spec.cron === null
          ? T
          : (new Cron(spec.cron, { ...(spec.timezone === null ? {} : { timezone: spec.timezone }), paused: true })
              .nextRun(new Date(T))
              ?.getTime() ?? T);
      for (const gap of gaps) {
        const decision = catchUp(spec, due, due + gap);
        expect(decision.next, `${JSON.stringify(spec)} +${gap}`).toBeGreaterThan(due + gap);
        expect(decision.skipped).toBeGreaterThanOrEqual(0);
        if (spec.cron !== null) expect(decision.skipped).toBeLessThanOrEqual(SKIPPED_COUNT_CAP);
      }
    }
  });

  it("a cron expression with no occurrence left after now has no next (the schedule ends)", () => {
    expect(catchUp(cron("0 0 0 1 1 * 2026"), Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 2))).toEqual({
      fire: true,
      skipped: 0,
      capped: false,
      next: null,
    });
  });
});
