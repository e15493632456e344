/**
 * Declared waits (§5.3): `runtime.sleep` until a durable wake time and `runtime.awaitAnswer`
 * for an external answer. A parked invocation is held in memory and reported to the host as a wake time,
 * not as busy: no heartbeat, no kill counted while it waits. Parking, waking and interrupting are steps
 * on the line, so an interrupt or an answer that comes while the invocation is running but not parked
 * is kept for its next wait instead of being lost.
 */
import type { Id } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError } from "./errors.js";
import type { Action } from "./driver-types.js";
import type { DriverState } from "./driver-state.js";

/** The reason an interrupted sleep's timer is aborted with (never seen outside the driver). */
const INTERRUPTED: unique symbol = Symbol("pico.sleep.interrupted");

/**
 * Sleep until `untilMs`; `Infinity` sleeps with no wake time (the host arms no alarm for it), so only
 * `interruptSleep` or cancellation end it. An `interruptSleep` that came while the invocation was
 * running but not asleep makes this sleep return at once, so a task that read its durable state and
 * then sleeps cannot miss a change committed in between.
 */
export async function sleep(s: DriverState, taskId: Id, untilMs: number, call: Call): Promise<void> {
  const wakeAt = Number.isFinite(untilMs) ? untilMs : undefined;
  if (wakeAt !== undefined && wakeAt <= s.clock.now()) {
    s.pendingInterrupts.delete(taskId);
    // A wake registered at dispatch (sleepsUntil) that has passed meanwhile: the task is awake.
    if (s.sleepers.has(taskId)) await s.onLine(() => wake(s, taskId));
    return;
  }
  const sleep = new AbortController();
  const interrupt = (): void => sleep.abort(INTERRUPTED);
  // Parking and registering the interrupter are one step on the line: an interruptSleep is either
  // pending before it (the sleep does not start) or finds the interrupter.
  const parked = await s.session.line.run((): Action | undefined => {
    if (s.pendingInterrupts.delete(taskId)) return undefined;
    s.interrupts.set(taskId, interrupt);
    return park(s, taskId, wakeAt);
  });
  if (parked === undefined) {
    if (s.sleepers.has(taskId)) await s.onLine(() => wake(s, taskId));
    return;
  }
  parked();
  const cancel = (): void => sleep.abort(call.abortSignal?.reason);
  if (call.abortSignal?.aborted === true) cancel();
  else call.abortSignal?.addEventListener("abort", cancel, { once: true });
  try {
    if (wakeAt !== undefined) await s.clock.sleep(wakeAt, sleep.signal);
    else {
      await new Promise<never>((_resolve, reject) => {
        if (sleep.signal.aborted) reject(sleep.signal.reason);
        else sleep.signal.addEventListener("abort", () => reject(sleep.signal.reason), { once: true });
      });
    }
  } catch (error) {
    // An interrupted sleep returns early; cancellation still rejects.
    if (error !== INTERRUPTED || call.abortSignal?.aborted === true) throw error;
  } finally {
    call.abortSignal?.removeEventListener("abort", cancel);
    if (s.interrupts.get(taskId) === interrupt) s.interrupts.delete(taskId);
    await s.onLine(() => wake(s, taskId));
  }
}

/**
 * End task `taskId`'s current `runtime.sleep` now (it returns early, before its time), so the task
 * re-plans from durable state in its own commit: for a host whose settings commit changed what the
 * sleeper waits for (the witness's patrol interval, a schedule's pause or edit). The host never
 * patches the task (§6.1). When the task's invocation is running but not asleep, its next sleep
 * returns at once instead (it may have read the state before the host's commit). Resolves whether a
 * sleep was interrupted now.
 */
export function interruptSleep(s: DriverState, taskId: Id): Promise<boolean> {
  return s.session.line.run(() => {
    const interrupt = s.interrupts.get(taskId);
    if (interrupt === undefined) {
      if (s.running.has(taskId)) s.pendingInterrupts.add(taskId);
      return false;
    }
    s.interrupts.delete(taskId);
    interrupt();
    return true;
  });
}

/**
 * Park the invocation of `taskId` until `answerArrived(taskId)` or the deadline `untilMs` (the alarm
 * wakes an evicted object then), observing cancellation. The second kind of declared wait:
 * not busy, no heartbeat, no kill counted while parked. The answer itself is durable state the
 * caller reads (runtime.awaitAnswer); this only parks and wakes.
 */
export async function awaitAnswer(
  s: DriverState,
  taskId: Id,
  untilMs: number | undefined,
  call: Call,
): Promise<"answered" | "deadline"> {
  let answered: () => void = () => undefined;
  const arrival = new Promise<"answered">((resolve) => (answered = () => resolve("answered")));
  const parked = await s.session.line.run((): Action | undefined => {
    if (s.arrived.delete(taskId)) return undefined;
    s.answerWaiters.set(taskId, answered);
    return park(s, taskId, untilMs);
  });
  if (parked === undefined) return "answered";
  parked();
  const timer = new AbortController();
  const abort = (): void => timer.abort(call.abortSignal?.reason);
  call.abortSignal?.addEventListener("abort", abort, { once: true });
  try {
    const cancelled = new Promise<never>((_resolve, reject) => {
      if (call.abortSignal?.aborted === true) reject(call.abortSignal.reason);
      else timer.signal.addEventListener("abort", () => reject(timer.signal.reason), { once: true });
    });
    cancelled.catch(() => undefined);
    const deadline =
      untilMs === undefined ? [] : [s.clock.sleep(untilMs, timer.signal).then(() => "deadline" as const)];
    return await Promise.race([arrival, cancelled, ...deadline]);
  } finally {
    call.abortSignal?.removeEventListener("abort", abort);
    timer.abort(new PicoError("closed", "the wait ended"));
    await s.onLine(() => {
      if (s.answerWaiters.get(taskId) === answered) s.answerWaiters.delete(taskId);
      return wake(s, taskId);
    });
  }
}

/** An answer to `taskId`'s wait was committed: wake its parked invocation (on the line). */
export function answerArrived(s: DriverState, taskId: Id): Promise<void> {
  return s.onLine(() => {
    const waiter = s.answerWaiters.get(taskId);
    if (waiter !== undefined) {
      s.answerWaiters.delete(taskId);
      waiter();
    } else if (s.running.has(taskId)) s.arrived.add(taskId);
    return () => undefined;
  });
}

/** On the line: the invocation of `taskId` parks (the host learns its stretch ended alive). */
function park(s: DriverState, taskId: Id, untilMs: number | undefined): Action {
  if (!s.sleepers.has(taskId)) s.host.parked?.(taskId, s.stretch.get(taskId) ?? "start");
  const previous = s.sleepers.get(taskId);
  s.sleepers.set(
    taskId,
    previous === undefined ? untilMs : untilMs === undefined ? previous : Math.min(untilMs, previous),
  );
  return s.notifyHost();
}

/** On the line: a parked invocation of `taskId` works again (the host counts the new stretch). */
function wake(s: DriverState, taskId: Id): Action {
  if (!s.sleepers.delete(taskId)) return () => undefined;
  if (s.running.has(taskId)) {
    s.stretch.set(taskId, "wake");
    s.host.woke?.(taskId);
  }
  return s.notifyHost();
}
