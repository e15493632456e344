/**
 * Refused answers (src/core/answers.ts): one typed refusal, `AnswerRefused`, with why (nothing waits,
 * answered already with the answer recorded first, or the task is marked for abort); a refused answer
 * commits nothing and wakes nobody.
 */
import { describe, expect, it } from "vitest";
import { AnswerRefused, recordAnswer, waitValue, type AnswerHost, type WaitRecord } from "../../src/core/answers.js";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import type { ValueSpec } from "../../src/core/state.js";
import type { Id, JsonValue, Task } from "../../src/storage/records.js";

/** A host over one task and its wait, recording what was written and who was woken. */
function hostOf(task: Partial<Task> | undefined, wait: WaitRecord | undefined) {
  const writes: WaitRecord[] = [];
  const woken: Id[] = [];
  const host: AnswerHost = {
    storage: {
      getTasks: (ids) =>
        Promise.resolve(
          new Map(
            task === undefined
              ? []
              : ids.map((id) => [
                  id,
                  {
                    id,
                    conversationId: 1,
                    kind: "tool",
                    role: "inflight",
                    state: { status: "parked" },
                    after: [],
                    ...task,
                  } as Task,
                ]),
          ),
        ),
    },
    commit: async (plan) =>
      plan({
        value<T>(spec: ValueSpec<T>) {
          expect(spec.key).toBe(waitValue(7).key);
          return {
            get: () => Promise.resolve(wait as T | undefined),
            set: (value: T) => void writes.push(value as WaitRecord),
            delete: () => undefined,
          };
        },
      }),
    now: () => 1000,
    answerArrived: (id) => {
      woken.push(id);
      return Promise.resolve();
    },
  };
  return { host, writes, woken };
}

async function refusal(
  task: Partial<Task> | undefined,
  wait: WaitRecord | undefined,
  value: JsonValue = { approve: true },
): Promise<AnswerRefused> {
  const { host, writes, woken } = hostOf(task, wait);
  const error = await recordAnswer(host, 7, "t7-approval", value, BACKGROUND_CONTEXT).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AnswerRefused);
  expect(writes).toEqual([]);
  expect(woken).toEqual([]);
  return error as AnswerRefused;
}

describe("refused answers", () => {
  it("nothing waits: not_waiting (code not_found)", async () => {
    expect(await refusal(undefined, undefined)).toMatchObject({ reason: "not_waiting", code: "not_found" });
    expect(await refusal({ role: "terminal" }, undefined)).toMatchObject({ reason: "not_waiting", code: "not_found" });
    expect(await refusal({}, { key: "t7-client", since: 1 })).toMatchObject({
      reason: "not_waiting",
      code: "not_found",
    });
  });

  it("answered already: answered (code conflict) with the answer recorded first", async () => {
    const first = { value: { approve: false, reason: "no" }, at: 500 };
    const error = await refusal({}, { key: "t7-approval", since: 1, answer: first });
    expect(error).toMatchObject({ reason: "answered", code: "conflict", current: first });
  });

  it("a task marked for abort: aborted (code conflict)", async () => {
    expect(await refusal({ abort: true }, { key: "t7-approval", since: 1 })).toMatchObject({
      reason: "aborted",
      code: "conflict",
    });
  });

  it("an answer to a waiting task is recorded once and wakes it", async () => {
    const { host, writes, woken } = hostOf({}, { key: "t7-approval", since: 1 });
    expect(await recordAnswer(host, 7, "t7-approval", { approve: true }, BACKGROUND_CONTEXT)).toEqual({ at: 1000 });
    expect(writes).toEqual([{ key: "t7-approval", since: 1, answer: { value: { approve: true }, at: 1000 } }]);
    expect(woken).toEqual([7]);
  });
});
