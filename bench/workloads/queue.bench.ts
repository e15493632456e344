/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * §10.3 "queued input and cancellation": on SQLite in a Durable Object,
 * - a queue burst: 50 inputs accepted back to back (the first placed, the rest queued as followUp),
 *   then driven until idle;
 * - a withdraw storm: 50 inputs queued behind a running turn, each withdrawn (`abortInput`) as soon
 *   as it is accepted;
 * - an abort storm: 50 times, an input placed and the conversation aborted at once.
 * Prints rows read and written per input (accept, answer, withdraw or abort included) and bytes, and
 * asserts that every input has exactly one result.
 *
 * Run: npm run bench:queue
 */
import { expect, it } from "vitest";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { call, inObject, openSession, parallelAnswer, reading, since, table } from "./session.js";

const N = 50;

type Storm = "queue" | "withdraw" | "abort";

async function run(storm: Storm): Promise<(string | number)[]> {
  return inObject(`queue-${storm}`, async (state) => {
    const storage = SqliteStorage.open(state.storage);
    const s = await openSession(storage, parallelAnswer(2));
    const root = await s.harness.root(call);
    await root.prompt({ input: "warm up" }, call);
    const b0 = state.storage.sql.databaseSize;
    const r0 = reading(storage, state);
    const inputs: number[] = [];
    const outcomes = new Map<string, number>();
    const count = (key: string): void => {
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    };
    s.refill();
    if (storm === "queue" || storm === "withdraw") {
      // The first input places a generation; the driver runs it only when awaited, so the rest queue behind it.
      for (let i = 0; i < N + (storm === "withdraw" ? 1 : 0); i++) {
        const receipt = await root.accept({ input: `q${i}`, whenBusy: "followUp" }, call);
        count(receipt.status);
        inputs.push(receipt.inputId);
        // Withdrawn at once, before the running generation reaches a boundary that would take it.
        if (storm === "withdraw" && i > 0) count(`withdraw ${await root.abortInput(receipt.inputId, call)}`);
      }
      s.refill();
      await root.drive(call);
    } else {
      for (let i = 0; i < N; i++) {
        s.refill();
        const receipt = await root.accept({ input: `a${i}` }, call);
        count(receipt.status);
        inputs.push(receipt.inputId);
        await root.abort(call);
        await root.drive(call);
      }
    }
    const d = since(r0, reading(storage, state));
    const results = new Map<string, number>();
    for (const id of inputs) {
      const result = await root.result(id, call);
      const key = result === undefined ? "none" : String((result as { status?: unknown }).status ?? "?");
      results.set(key, (results.get(key) ?? 0) + 1);
    }
    await s.harness.close(call);
    const summary = [...results].map(([k, v]) => `${k} ${v}`).join(", ");
    const steps = [...outcomes].map(([k, v]) => `${k} ${v}`).join(", ");
    return [
      storm,
      inputs.length,
      steps,
      summary,
      d.rowsRead / inputs.length,
      d.rowsWritten / inputs.length,
      (state.storage.sql.databaseSize - b0) / inputs.length,
    ];
  });
}

it(`queue: ${N}-input queue burst, withdraw storm and abort storm (sqlite)`, async () => {
  const rows = [await run("queue"), await run("withdraw"), await run("abort")];
  table(
    "bench/workloads queue — SQLite in a Durable Object; rows exact, per input",
    ["storm", "inputs", "accepted / withdrawn", "results", "rows read", "rows written", "db bytes"],
    rows,
  );
  for (const r of rows) expect(String(r[3])).not.toContain("none");
}, 600_000);
