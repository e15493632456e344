/**
 * What a host (the session Durable Object, a test, a CLI) plugs into the driver: a clock, durable
 * invocation bookkeeping (quarantine), a tracer (§6.5), wake-time and busy notifications (alarms, heartbeats) and fault
 * reports. Everything here is optional; the defaults suit an in-process host.
 */
import type { Id, Task } from "../storage/records.js";
import type { Telemetry } from "./telemetry.js";

export type InvocationMethod = "execute" | "recover" | "abort";

/** How an invocation starts: parked in a declared sleep (not working yet) or working. */
export interface InvocationStart {
  readonly parked: boolean;
}

/** Where a working stretch of an invocation began: its start, or a wake from a declared wait. */
export type WorkStretch = "start" | "wake";

/** The injected clock (§5.3: task code uses runtime.now(), never Date.now()). */
export interface Clock {
  now(): number;
  /** Resolve at or after `untilMs`; reject with the signal's reason when it aborts first. */
  sleep(untilMs: number, signal: AbortSignal | undefined): Promise<void>;
}

/** A fail-stop report (§6.1): which task, kind and method broke the task contract, and how. */
export interface FaultReport {
  readonly taskId?: Id;
  readonly kind?: string;
  readonly method?: InvocationMethod;
  readonly error: unknown;
  readonly message: string;
}

export interface DriverHost {
  readonly clock?: Clock;
  /** One span per execute/recover/abort invocation goes to this tracer (§6.5); absent: no-op. */
  readonly telemetry?: Telemetry;
  /**
   * On the line, before an invocation is dispatched. The host makes its bookkeeping durable here
   * (synchronously) and may withhold execute/recover of a task that keeps killing the process
   * (quarantine): return false and the driver neither starts it nor reserves it again until
   * `Driver.release(taskId)`. Abort invocations are never withheld. `start.parked`: the invocation
   * starts parked in a declared sleep (its kind's `sleepsUntil` is in the future), so it is not working
   * yet: a kill before it wakes is no crash.
   */
  beforeInvoke?(task: Task, method: InvocationMethod, start: InvocationStart): boolean;
  /**
   * After an invocation returned or threw (not when the process was killed), with the task's status
   * then: its live status, or the terminal status it settled with.
   */
  afterInvoke?(taskId: Id, method: InvocationMethod, status: string): void;
  /**
   * On the line: the invocation of `taskId` parked in a declared wait (a sleep until a durable wake time,
   * or a wait for an external answer). It stopped working alive, so a kill while it is parked is no
   * crash. `stretch` says how the working stretch that ends here began: at the invocation's
   * start, or at a wake from an earlier declared wait (a whole wait cycle went by alive).
   */
  parked?(taskId: Id, stretch: WorkStretch): void;
  /** On the line: the invocation of `taskId` woke from a declared wait and works again. */
  woke?(taskId: Id): void;
  /** The earliest wake time of sleeping tasks changed (undefined: nobody sleeps). */
  wakeChanged?(earliest: number | undefined): void;
  /** Whether invocations are in flight changed (hosts keep the process alive while busy). */
  busyChanged?(busy: boolean): void;
  /** The session faulted (fail-stop); it admits nothing until reopened. */
  faulted?(report: FaultReport): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (untilMs, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const timer = setTimeout(
        () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        Math.max(0, untilMs - Date.now()),
      );
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};
