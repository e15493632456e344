/**
 * The `remote_call` task kind: one background task per request that leaves the object (an HTTP tool's
 * call, or a call of a registered MCP server's tool). Its id, with the session's incarnation, is the request's
 * identity everywhere: for HTTP, `Idempotency-Key` and `webhook-id` are `{session}:{incarnation}:{taskId}`
 * (incarnation.ts), and a late result is posted to `/v1/tool-results/{tenant}/{session}/{taskId}` under that
 * webhook-id; an MCP call answers in its own response (never 202).
 *
 *   planned -> dispatched { attempt n, firstSentAt, until } -> settled { outcome } | aborted { outcome }
 *                  |  ^                \-> accepted (202) -> settled (the posted result, or timeout)
 *                  v  |
 *               retry_wait { nextAt }   (idempotent targets only, at most maxAttempts attempts)
 *
 *   roles:    planned=start; dispatched, retry_wait, accepted=inflight; settled, aborted=terminal
 *   execute:  R1 { dispatched; at n=1 also the wait pico.wait/<id> for "result" } BEFORE the request
 *             leaves (the output gate holds the fetch until the commit is durable); then one reply:
 *             200 -> settled output; 202 -> accepted, then runtime.awaitAnswer("result") -> settled;
 *             4xx -> settled http_status; 5xx/network/timeout -> idempotent and n < max: retry_wait,
 *             runtime.sleep to nextAt (the alarm) and R1 with n+1; otherwise outcome_unknown / failed.
 *             timed_out (an MCP call: no answer or progress within its timeout, or past its cap) ->
 *             settled timeout (the server was told to cancel; never re-sent).
 *   recover:  dispatched: an answered wait settles with it; idempotent -> R1 with n+1 under the same key;
 *             otherwise settled outcome_unknown naming the task (never sent twice). retry_wait: sleep,
 *             then R1. accepted: await the answer again.
 *   abort:    planned -> aborted "not sent"; otherwise the wait ends and the call is aborted.
 *
 * An answer recorded early (a product that posts its result before, or instead of, its 202) wins: every
 * path checks the wait before it sends or settles. While `retry_wait` sleeps and `accepted` waits the
 * task is parked (no heartbeat, no kill counted); `dispatched` is working. Every terminal commit ends the
 * wait and consumes the notice request of a tool call that delegated to it (`delegateRemoteNotice`), so
 * the late result lands as exactly one notice whichever comes first.
 */
import type { SystemMessage } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import { noticeEntry, noticeKind } from "../core/entries.js";
import { endWait, waitValue, type WaitRecord } from "../core/answers.js";
import { PicoError, TaskCancelled, isInvocationCancellation } from "../core/errors.js";
import type { Harness } from "../core/harness.js";
import type { TaskRuntime } from "../core/runtime.js";
import { sessionValue, withKey } from "../core/state.js";
import { defineTaskKind, type TaskDefinition, type TypedTask } from "../core/task-kind.js";
import { conversationTx, type TxBuilder } from "../core/tx.js";
import type { Id, JsonObject, JsonValue } from "../storage/records.js";
import { remoteCallKey } from "./incarnation.js";
import { mcpResultText } from "./mcp-result.js";
import {
  remoteCallRoles,
  type RemoteCallInput,
  type RemoteCallServices,
  type RemoteCallState,
  type RemoteErrorCode,
  type RemoteOutcome,
  type RemoteReply,
  type RemoteTarget,
} from "./remote-call-state.js";

export const remoteCallDefinition: TaskDefinition<RemoteCallState, typeof remoteCallRoles> = {
  kind: "remote_call",
  roles: remoteCallRoles,
};

type RemoteCallTask = TypedTask<RemoteCallState, typeof remoteCallRoles>;

/** The wait key of a remote call's result (`pico.wait/<id>`), answered by the result route. */
export const REMOTE_RESULT_KEY = "result";

/** Attempts of an idempotent call, the first included. */
export const DEFAULT_REMOTE_ATTEMPTS = 8;

const BACKOFF_BASE_MS = 1000;
const BACKOFF_MAX_MS = 300_000;

/**
 * The wait before attempt n+1 after attempt n failed: min(1 s * 2^(n-1), 5 min) plus up to 25 % jitter
 * hashed from the task id and n, so a replay computes the same time (task code never draws randomness).
 */
export function remoteBackoffMs(attempt: number, id: Id): number {
  const base = Math.min(BACKOFF_BASE_MS * 2 ** (attempt - 1), BACKOFF_MAX_MS);
  return base + Math.floor(base * 0.25 * hashFraction(`${id}:${attempt}`));
}

/** FNV-1a over the string, as a fraction in [0, 1). */
function hashFraction(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h / 0x1_0000_0000;
}

// ---------------------------------------------------------------------------------------------
// Notice requests (§8.3): the tool call that delegated to a remote call hears of its end once.

/** A sticky request for a remote call's completion notice: set by the delegating tool's settlement. */
export interface RemoteNoticeRequest extends JsonObject {
  conversationId: Id;
  callId: string;
}

const remoteNotices = sessionValue<RemoteNoticeRequest>("pi.remote.notice");

export function remoteNoticeRequest(id: Id) {
  return withKey(remoteNotices, String(id));
}

const NOTICE_TAIL_CHARS = 2000;

/** The notice entry of a finished remote call: a built-in `notice` entry with a stored SystemMessage. */
function appendRemoteNotice(
  b: TxBuilder,
  conversationId: Id,
  id: Id,
  name: string,
  target: RemoteTarget,
  outcome: RemoteOutcome,
  now: number,
): Id {
  const text = outcomeText(outcome, target);
  const tail = text.length > NOTICE_TAIL_CHARS ? text.slice(text.length - NOTICE_TAIL_CHARS) : text;
  const what =
    outcome.type === "output" ? (outcome.isError ? "returned an error" : "returned") : `failed (${outcome.code})`;
  const body =
    `Remote call ${id} (tool ${name}) ${what}.` +
    (tail === ""
      ? ""
      : `\n${outcome.type === "output" ? "Output" : "Error"}${tail.length < text.length ? ` (last ${tail.length} characters)` : ""}:\n${tail}`);
  const message: SystemMessage = { role: "system", content: body, timestamp: now };
  const data: JsonObject = {
    remoteCall: {
      id,
      tool: name,
      outcome: outcome.type === "output" ? (outcome.isError ? "error" : "output") : outcome.code,
    },
  };
  return conversationTx(b, conversationId).write(noticeKind, noticeEntry(data, message));
}

/** In a terminal commit of the remote call: consume a pending notice request and publish the notice. */
async function consumeRemoteNotice(
  b: TxBuilder,
  id: Id,
  input: RemoteCallInput,
  outcome: RemoteOutcome,
  now: number,
): Promise<void> {
  const addr = remoteNoticeRequest(id);
  const request = await b.value(addr).get();
  if (request === undefined) return;
  b.value(addr).delete();
  appendRemoteNotice(b, request.conversationId, id, input.name, input.target, outcome, now);
}

/**
 * Delegation settlement of a tool call that waited for remote call `id` past its budget: request the
 * notice if the call is live, place it now if it already ended. Either way, one notice.
 */
export async function delegateRemoteNotice(
  b: TxBuilder,
  conversationId: Id,
  id: Id,
  callId: string,
  now: number,
): Promise<void> {
  const task = await conversationTx(b, conversationId).getTask(remoteCallDefinition, id);
  if (task === undefined) return;
  const state = task.state;
  if (state.status === "settled" || state.status === "aborted") {
    appendRemoteNotice(b, conversationId, id, state.name, state.target, state.outcome, now);
    return;
  }
  b.value(remoteNoticeRequest(id)).set({ conversationId, callId });
}

/** Is task `id` a remote call (in the committing transaction)? */
export async function isRemoteCall(b: TxBuilder, id: Id): Promise<boolean> {
  return (await b.getTask(remoteCallDefinition, id)) !== undefined;
}

/**
 * The text an outcome stands for: the error's message, or the output as text (an MCP result's content,
 * mcp-result.ts; otherwise JSON for anything but a string).
 */
export function outcomeText(outcome: RemoteOutcome, target: RemoteTarget): string {
  if (outcome.type === "error") return outcome.message;
  if (target.type === "mcp") return mcpResultText(outcome.output);
  return typeof outcome.output === "string" ? outcome.output : JSON.stringify(outcome.output);
}

/**
 * How messages name where a call goes: the HTTP tool by its name, or the MCP server and its tool; never a
 * URL (an operator's setting, perhaps with a key in its query: messages reach the model and users).
 */
export function targetLabel(target: RemoteTarget): string {
  return target.type === "http"
    ? `HTTP tool "${target.tool}"`
    : `MCP server "${target.server}" (tool ${target.remoteTool})`;
}

/** How a call that may have been delivered is reconciled: HTTP by its Idempotency-Key; MCP has no key. */
function reconcileHint(target: RemoteTarget, session: string, incarnation: string | undefined, id: Id): string {
  return target.type === "http"
    ? `reconcile with Idempotency-Key ${remoteCallKey(session, incarnation, id)}`
    : `check with the server whether it ran`;
}

// ---------------------------------------------------------------------------------------------
// The kind

type Progress = { readonly attempt: number; readonly firstSentAt: number };

export function createRemoteCallKind(services: RemoteCallServices | undefined) {
  const maxAttempts = services?.maxAttempts ?? DEFAULT_REMOTE_ATTEMPTS;

  const kind = defineTaskKind<RemoteCallState, TaskRuntime>()({
    kind: "remote_call",
    roles: remoteCallRoles,
    initialStatus: "planned",
    // Between attempts the call sleeps until its next attempt: parked from dispatch, woken by the alarm.
    sleepsUntil: (state) => (state.status === "retry_wait" ? state.nextAt : undefined),

    async execute(task, runtime, call) {
      if (task.state.status !== "planned")
        throw new PicoError("contract", `remote call ${task.id} executes only from planned, not ${task.state.status}`);
      await attempt(task, runtime, undefined, call);
    },

    async recover(task, runtime, call) {
      const state = task.state;
      switch (state.status) {
        case "dispatched": {
          const answered = await answeredWait(runtime, task.id, call);
          if (answered !== undefined) {
            await settle(task, runtime, "settled", answerOutcome(answered.value), state.attempt, call);
            return;
          }
          if (state.target.idempotent) {
            if (state.attempt >= maxAttempts) {
              await settle(
                task,
                runtime,
                "settled",
                failure(
                  "failed",
                  `remote call ${task.id} to ${targetLabel(state.target)} gave no answer in ${state.attempt} attempts (the last was cut short by a restart)`,
                ),
                state.attempt,
                call,
              );
              return;
            }
            // Sent again (HTTP: under the same key, the product de-duplicates by its Idempotency-Key; MCP: the tool
            // declared itself idempotent).
            await attempt(task, runtime, { attempt: state.attempt + 1, firstSentAt: state.firstSentAt }, call);
            return;
          }
          const where = services?.where();
          const message = `remote call task ${task.id} may have reached ${targetLabel(state.target)} before a restart; it is never re-sent; ${reconcileHint(state.target, where?.session ?? "<session>", where?.incarnation, task.id)}`;
          await settle(task, runtime, "settled", failure("outcome_unknown", message), state.attempt, call);
          return;
        }
        case "retry_wait":
          await runtime.sleep(state.nextAt, call);
          await attempt(task, runtime, { attempt: state.attempt + 1, firstSentAt: state.firstSentAt }, call);
          return;
        case "accepted":
          await awaitResult(task, runtime, state.until, state.attempt, call);
          return;
        case "planned":
        case "settled":
        case "aborted":
          throw new PicoError("contract", `remote call ${task.id} does not recover from ${state.status}`);
        default: {
          const never: never = state;
          throw new PicoError("contract", `unknown remote call status ${JSON.stringify(never)}`);
        }
      }
    },

    async abort(task, runtime, call) {
      const state = task.state;
      if (state.status === "planned") {
        await settle(
          task,
          runtime,
          "aborted",
          failure("aborted", `remote call ${task.id} was aborted before it was sent`),
          0,
          call,
        );
        return;
      }
      if (state.status === "settled" || state.status === "aborted")
        throw new PicoError("contract", `remote call ${task.id} is already ${state.status}`);
      const message = `remote call ${task.id} was aborted; the request to ${targetLabel(state.target)} may have been delivered`;
      await settle(task, runtime, "aborted", failure("aborted", message), state.attempt, call);
    },
  });

  /**
   * R1 and what one reply causes. `progress` undefined: the first attempt. The dispatched mark (and, first,
   * the wait) is durable before the request leaves; an answer already recorded settles instead.
   */
  async function attempt(
    task: RemoteCallTask,
    runtime: TaskRuntime,
    progress: Progress | undefined,
    call: Call,
  ): Promise<void> {
    const input = inputOf(task.state);
    const n = progress?.attempt ?? 1;
    const where = services?.where();
    const transport = services?.transport(input.target);
    if (where === undefined || transport === undefined) {
      const why =
        where === undefined
          ? `remote call ${task.id} cannot be sent: this session has no tenant (it was not created over HTTP)`
          : `remote call ${task.id} cannot be sent: no transport for ${input.target.type} targets`;
      await settle(task, runtime, "settled", failure("no_tenant", why), n - 1, call);
      return;
    }
    const now = runtime.now();
    const firstSentAt = progress?.firstSentAt ?? now;
    const until = now + input.target.timeoutMs;
    const early = await runtime.commitBuilder(async (b) => {
      const wait = b.value(waitValue(task.id));
      const current = await wait.get();
      if (current?.answer !== undefined) return current.answer;
      const declared: WaitRecord = { key: REMOTE_RESULT_KEY, since: current?.since ?? now, until };
      wait.set(declared);
      b.patch(task, "dispatched", { ...input, attempt: n, firstSentAt, until });
      return undefined;
    }, call);
    if (early !== undefined) {
      await settle(task, runtime, "settled", answerOutcome(early.value), n - 1, call);
      return;
    }
    let reply: RemoteReply;
    try {
      reply = await transport.send(
        {
          taskId: task.id,
          attempt: n,
          tenant: where.tenant,
          session: where.session,
          ...(where.incarnation === undefined ? {} : { incarnation: where.incarnation }),
          conversationId: task.conversationId,
          toolCallId: input.origin.callId,
          target: input.target,
          name: input.name,
          arguments: input.arguments,
        },
        call.abortSignal,
      );
    } catch (error) {
      if (isCancellation(error, call)) throw error;
      // A transport that throws did not send (it returns `failed` for anything that may have left).
      await settle(
        task,
        runtime,
        "settled",
        failure("failed", `remote call ${task.id} could not be sent: ${describe(error)}`),
        n,
        call,
      );
      return;
    }
    if (call.abortSignal?.aborted === true) throw new TaskCancelled(task.id);
    switch (reply.type) {
      case "result":
        await settle(
          task,
          runtime,
          "settled",
          { type: "output", output: reply.output, isError: reply.isError },
          n,
          call,
        );
        return;
      case "accepted": {
        const acceptedAt = runtime.now();
        const answered = await runtime.commitBuilder(async (b) => {
          const current = await b.value(waitValue(task.id)).get();
          if (current?.answer !== undefined) return current.answer;
          b.patch(task, "accepted", { ...input, attempt: n, firstSentAt, until, acceptedAt });
          return undefined;
        }, call);
        if (answered !== undefined) {
          await settle(task, runtime, "settled", answerOutcome(answered.value), n, call);
          return;
        }
        await awaitResult(task, runtime, until, n, call);
        return;
      }
      case "rejected": {
        const message = `${targetLabel(input.target)} refused remote call ${task.id} with HTTP ${reply.status}${reply.detail === "" ? "" : `: ${reply.detail}`}`;
        await settle(task, runtime, "settled", failure("http_status", message, reply.status, reply.problem), n, call);
        return;
      }
      case "too_large":
        await settle(
          task,
          runtime,
          "settled",
          failure("too_large", `the response of ${targetLabel(input.target)} to remote call ${task.id} is over 1 MB`),
          n,
          call,
        );
        return;
      case "bad_response":
        await settle(
          task,
          runtime,
          "settled",
          failure(
            "bad_response",
            `${targetLabel(input.target)} answered remote call ${task.id} with a bad response: ${reply.detail}`,
          ),
          n,
          call,
        );
        return;
      case "timed_out":
        await settle(
          task,
          runtime,
          "settled",
          failure("timeout", `remote call ${task.id} to ${targetLabel(input.target)} timed out: ${reply.detail}`),
          n,
          call,
        );
        return;
      case "failed": {
        if (input.target.idempotent && n < maxAttempts) {
          const nextAt = runtime.now() + remoteBackoffMs(n, task.id);
          await runtime.commitBuilder((b) => {
            b.patch(task, "retry_wait", { ...input, attempt: n, firstSentAt, until, nextAt, lastError: reply.detail });
          }, call);
          await runtime.sleep(nextAt, call);
          await attempt(task, runtime, { attempt: n + 1, firstSentAt }, call);
          return;
        }
        const outcome = input.target.idempotent
          ? failure(
              "failed",
              `remote call ${task.id} to ${targetLabel(input.target)} failed ${n} times; the last: ${reply.detail}`,
              reply.status,
            )
          : reply.status === undefined
            ? failure(
                "outcome_unknown",
                `remote call task ${task.id} may have reached ${targetLabel(input.target)} (${reply.detail}); it is never re-sent; ${reconcileHint(input.target, where.session, where.incarnation, task.id)}`,
              )
            : failure(
                "failed",
                `remote call ${task.id} to ${targetLabel(input.target)} failed: ${reply.detail}`,
                reply.status,
              );
        await settle(task, runtime, "settled", outcome, n, call);
        return;
      }
      default: {
        const never: never = reply;
        throw new PicoError("contract", `unknown remote reply ${JSON.stringify(never)}`);
      }
    }
  }

  /** Parked on the result wait until its deadline; then settled with the answer or a timeout. */
  async function awaitResult(
    task: RemoteCallTask,
    runtime: TaskRuntime,
    until: number,
    attempts: number,
    call: Call,
  ): Promise<void> {
    const outcome = await runtime.awaitAnswer(REMOTE_RESULT_KEY, { until }, call);
    const settled: RemoteOutcome =
      outcome.type === "answered"
        ? answerOutcome(outcome.value)
        : failure(
            "timeout",
            `remote call ${task.id} was accepted by ${targetLabel(task.state.target)} but no result was posted before its deadline`,
          );
    await settle(task, runtime, "settled", settled, attempts, call);
  }

  return kind;
}

/** One terminal commit: the wait ends, a notice request is consumed, the call settles. */
async function settle(
  task: RemoteCallTask,
  runtime: TaskRuntime,
  status: "settled" | "aborted",
  outcome: RemoteOutcome,
  attempts: number,
  call: Call,
): Promise<void> {
  const input = inputOf(task.state);
  await runtime.commitBuilder(async (b) => {
    endWait(b, task.id);
    await consumeRemoteNotice(b, task.id, input, outcome, runtime.now());
    b.settle(task, status, { ...input, outcome: outcome as RemoteOutcome & JsonObject, attempts });
  }, call);
}

/** A posted result (`{ output, isError? }`, checked by the route) as an outcome. */
function answerOutcome(value: JsonValue): RemoteOutcome {
  if (value !== null && typeof value === "object" && !Array.isArray(value) && "output" in value) {
    const output = value["output"] ?? null;
    return { type: "output", output, isError: value["isError"] === true };
  }
  return { type: "output", output: value, isError: false };
}

function failure(code: RemoteErrorCode, message: string, status?: number, problem?: JsonObject): RemoteOutcome {
  return {
    type: "error",
    code,
    message,
    ...(status === undefined ? {} : { status }),
    ...(problem === undefined ? {} : { problem }),
  };
}

/** The input fields of any state: what the call was created with. */
function inputOf(state: RemoteCallState): RemoteCallInput {
  return { target: state.target, name: state.name, arguments: state.arguments, origin: state.origin };
}

async function answeredWait(
  runtime: TaskRuntime,
  id: Id,
  call: Call,
): Promise<{ readonly value: JsonValue } | undefined> {
  const wait = await runtime.value(waitValue(id)).get(call);
  return wait?.key === REMOTE_RESULT_KEY ? wait.answer : undefined;
}

/** A remote call's status and, once it ended, its outcome (reads committed state only). */
export async function readRemoteCall(
  harness: Harness,
  id: Id,
  call: Call,
): Promise<
  | {
      readonly status: RemoteCallState["status"] | "orphaned";
      readonly outcome?: RemoteOutcome;
      readonly firstSentAt?: number;
    }
  | undefined
> {
  const task = await harness.getTask(remoteCallDefinition, id, call);
  if (task === undefined) return undefined;
  const state = task.state;
  if (state.status === "settled" || state.status === "aborted") return { status: state.status, outcome: state.outcome };
  const sent = state.status === "planned" ? undefined : state.firstSentAt;
  return typeof sent === "number" ? { status: state.status, firstSentAt: sent } : { status: state.status };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Is this the invocation's cancellation (mark or close), rather than an ordinary failure? */
function isCancellation(error: unknown, call: Call): boolean {
  return isInvocationCancellation(error, call.abortSignal);
}
