/**
 * Drive and waiters (§6.2): `drive` attaches a scope and waits for its idle predicate, `waitForTask`
 * waits for one task to be terminal, each with an optional blocking budget and cancellation that removes
 * only its own waiter. Known self-waits are refused before they could hang: a foreground task driving its
 * own foreground scope, a wait whose dependency path leads back to the waiter, and a new task that would
 * close such a cycle (checked at admission). Waiters are resolved on the line after each reservation
 * round (`checkWaiters`); attaching is the scheduler's, passed in.
 */
import type { Id, Task } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError } from "./errors.js";
import { invocationKey, type Action } from "./driver-types.js";
import type { DriverState, TaskWaiter, Waiter } from "./driver-state.js";

/**
 * The reason a waiter's budget timer is cancelled with when the waiter leaves: the AbortError a
 * reasonless `abort()` would create, made once. Building a DOMException captures a stack (measured:
 * a noticeable share of a short turn's time, docs/performance.md), and nothing reads this one: the
 * budget sleep's rejection is ignored.
 */
const BUDGET_UNNEEDED = new DOMException("This operation was aborted", "AbortError");

/** Attach a scope on the line (the scheduler's `attachScope`); returns what to do after the line. */
export type Attach = (scope: Id | "session", call: Call) => Action;

/**
 * On the line, after each reservation round: the waiters whose scope is idle or whose task settled, and a drained
 * shutdown, resolve after the line.
 */
export function checkWaiters(s: DriverState): Action {
  const ready: Waiter[] = [];
  for (const w of s.waiters) if (s.idle(w.scope)) ready.push(w);
  for (const w of ready) s.waiters.delete(w);
  const done: TaskWaiter[] = [];
  for (const w of s.taskWaiters) if (!s.live.has(w.taskId)) done.push(w);
  for (const w of done) s.taskWaiters.delete(w);
  const shutdown = s.phase === "stopping" && s.drained() ? s.shutdown : undefined;
  return () => {
    for (const w of ready) {
      w.detach();
      w.resolve("idle");
    }
    for (const w of done) {
      w.detach();
      w.resolve(true);
    }
    if (shutdown !== undefined) shutdown.resolve();
  };
}

/**
 * drive's body (§6.2, §8.3): attach `scope`, then wait for its idle predicate. `budget`, when given,
 * removes only this waiter once it passes on the driver's clock; the attachment stays.
 */
export function driveScope(
  s: DriverState,
  scope: Id | "session",
  call: Call,
  budget: { readonly ms: number; readonly expired: () => void } | undefined,
  attach: Attach,
): Promise<"idle" | "closed"> {
  return new Promise<"idle" | "closed">((resolve, reject) => {
    void s.session.line
      .run((): Action => {
        s.admitLifecycle();
        if (s.phase === "closing" || s.phase === "closed") return () => resolve("closed");
        checkSelfDrive(s, scope, call);
        const attachActions = attach(scope, call);
        if (s.phase === "faulted") {
          // Attaching reserved work and the reservation itself fail-stopped: the waiter rejects.
          const error = new PicoError("faulted", `the session faulted: ${s.fault?.message ?? "unknown"}`);
          return () => {
            attachActions();
            reject(error);
          };
        }
        const signal = call.abortSignal;
        if (signal?.aborted) {
          return () => {
            attachActions();
            reject(signal.reason);
          };
        }
        if (s.idle(scope)) {
          return () => {
            attachActions();
            resolve("idle");
          };
        }
        const onAbort = (): void => {
          // The listener enqueues removal on the line; the waiter is removed exactly once.
          void s.session.line.run(() => {
            if (s.waiters.delete(waiter)) {
              waiter.detach();
              reject(signal?.reason);
            }
          });
        };
        const timer = new AbortController();
        const waiter: Waiter = {
          scope,
          taskId: call.value(invocationKey)?.taskId,
          resolve,
          reject,
          detach: () => {
            signal?.removeEventListener("abort", onAbort);
            timer.abort(BUDGET_UNNEEDED);
          },
        };
        s.waiters.add(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
        if (budget !== undefined) {
          // The budget removes only this waiter (on the line, exactly once); the attachment stays.
          s.clock.sleep(s.clock.now() + budget.ms, timer.signal).then(
            () =>
              s.session.line.run(() => {
                if (s.waiters.delete(waiter)) {
                  waiter.detach();
                  budget.expired();
                }
              }),
            () => undefined,
          );
        }
        return attachActions;
      })
      .then((after) => after(), reject);
  });
}

/**
 * Known self-waits (§6.2): a foreground task cannot drive its own foreground scope, nor a scope whose
 * foreground set holds a task whose unresolved dependency path leads back to the caller (this also
 * catches a background task T driving a foreground D with after: [T]).
 */
export function checkSelfDrive(s: DriverState, scope: Id | "session", call: Call): void {
  const inv = call.value(invocationKey);
  if (inv === undefined) return;
  const lt = s.live.get(inv.taskId);
  if (lt !== undefined && lt.task.background !== true && (scope === "session" || s.inForegroundScope(lt.task, scope))) {
    throw new PicoError(
      "contract",
      `foreground task ${inv.taskId} cannot drive its own foreground scope (conversation ${String(scope)}); that wait could never finish (§6.2)`,
    );
  }
  if (scope === "session" || !s.live.has(inv.taskId)) return;
  for (const id of s.foregroundClosure(scope).tasks) {
    if (s.dependsOn(id, inv.taskId)) {
      throw new PicoError(
        "contract",
        `task ${inv.taskId} cannot drive conversation ${scope}: its foreground task ${id} waits, through its dependencies, for task ${inv.taskId} (§6.2)`,
      );
    }
  }
}

/**
 * Cycle-creating admission (§6.2): a new foreground task whose dependencies lead back to a task that is
 * waiting on a drive of a scope the new task would join is rejected before persistence.
 */
export function checkNewWaitCycles(s: DriverState, task: Task): void {
  if (task.background === true || task.role === "terminal") return;
  for (const waiter of s.waiters) {
    if (waiter.taskId === undefined || waiter.scope === "session") continue;
    if (!task.after.some((dep) => s.dependsOn(dep, waiter.taskId as Id))) continue;
    if (s.inForegroundScope(task, waiter.scope)) {
      throw new PicoError(
        "contract",
        `new task ${task.id} in conversation ${task.conversationId} would wait, through its dependencies, for task ${waiter.taskId}, which is driving conversation ${waiter.scope} (§6.2)`,
      );
    }
  }
}

/** Wait until a task is terminal, or `budgetMs` passes (false). Known self-waits reject (§6.2). */
export function waitForTask(
  s: DriverState,
  id: Id,
  options: { budgetMs?: number } | undefined,
  call: Call,
): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    void s.session.line
      .run((): Action => {
        s.admitLifecycle();
        if (s.phase === "closing" || s.phase === "closed") throw new PicoError("closed", "the session is closing");
        const inv = call.value(invocationKey);
        if (inv !== undefined && s.dependsOn(id, inv.taskId)) {
          throw new PicoError(
            "contract",
            `task ${inv.taskId} cannot wait for task ${id}: its unresolved dependencies lead back to the waiter (§6.2)`,
          );
        }
        if (!s.live.has(id)) return () => resolve(true);
        const signal = call.abortSignal;
        const budget = new AbortController();
        const onAbort = (): void => {
          void s.session.line.run(() => {
            if (s.taskWaiters.delete(waiter)) {
              waiter.detach();
              reject(signal?.reason);
            }
          });
        };
        const waiter: TaskWaiter = {
          taskId: id,
          resolve,
          reject,
          detach: () => {
            signal?.removeEventListener("abort", onAbort);
            budget.abort(BUDGET_UNNEEDED);
          },
        };
        s.taskWaiters.add(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
        if (options?.budgetMs !== undefined) {
          const until = s.clock.now() + options.budgetMs;
          s.clock.sleep(until, budget.signal).then(
            () =>
              s.session.line.run(() => {
                if (s.taskWaiters.delete(waiter)) {
                  waiter.detach();
                  resolve(false);
                }
              }),
            () => undefined,
          );
        }
        return () => undefined;
      })
      .then((after) => after(), reject);
  });
}
