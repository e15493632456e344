/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * §10.3 "parallel and sequential tools": 100 faux turns, each running four echo tools, on SQLite in a
 * Durable Object: parallel (one assistant message with four calls, then the answer) vs sequential (four
 * assistant messages with one call each, then the answer). Prints rows read/written, commits and
 * database bytes per turn; asserts that parallel calls share their generation's commits.
 *
 * Run: npm run bench:tools
 */
import { fauxAssistantMessage, fauxToolCall, type FauxResponseFactory } from "@earendil-works/pi-ai";
import { expect, it } from "vitest";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { call, inObject, openSession, parallelAnswer, reading, since, table, textOf } from "./session.js";

const TURNS = 100;
const CALLS = 4;

/** One call per assistant message until CALLS results followed the newest user message, then the answer. */
const sequentialAnswer: FauxResponseFactory = (context) => {
  const messages = context.messages;
  let results = 0;
  let i = messages.length - 1;
  for (; i >= 0 && messages[i]?.role !== "user"; i--) if (messages[i]?.role === "toolResult") results++;
  const prompt = messages[i];
  const text = prompt?.role === "user" ? textOf(prompt.content) : "";
  if (results >= CALLS) return fauxAssistantMessage("Done.");
  return fauxAssistantMessage([fauxToolCall("echo", { text: `${text} ${results}` }, { id: `s${results}-${text}` })], {
    stopReason: "toolUse",
  });
};

async function run(label: string, answer: FauxResponseFactory): Promise<(string | number)[]> {
  return inObject(`tools-${label}`, async (state) => {
    const storage = SqliteStorage.open(state.storage);
    const s = await openSession(storage, answer);
    let commits = 0;
    s.harness.onCommit(() => {
      commits++;
    });
    const root = await s.harness.root(call);
    const b0 = state.storage.sql.databaseSize;
    const r0 = reading(storage, state);
    for (let turn = 1; turn <= TURNS; turn++) {
      s.refill();
      const entry = await root.prompt({ input: `turn ${turn}` }, call);
      if (entry?.kind !== "assistant") throw new Error(`turn ${turn} got no answer`);
    }
    const d = since(r0, reading(storage, state));
    const tools = (await storage.scanTasks({ kind: "tool", limit: 1000 })).items.length;
    await s.harness.close(call);
    return [
      label,
      tools / TURNS,
      d.rowsRead / TURNS,
      d.rowsWritten / TURNS,
      commits / TURNS,
      (state.storage.sql.databaseSize - b0) / TURNS,
    ];
  });
}

it(`tools: ${TURNS} turns x ${CALLS} echo tools, parallel vs sequential (sqlite)`, async () => {
  const parallel = await run("parallel (1 message, 4 calls)", parallelAnswer(CALLS));
  const sequential = await run("sequential (4 messages, 1 call each)", sequentialAnswer);
  table(
    `bench/workloads tools — ${TURNS} turns, SQLite in a Durable Object; rows exact, per turn`,
    ["run", "tools/turn", "rows read", "rows written", "commits", "db bytes"],
    [parallel, sequential],
  );
  expect(parallel[1]).toBe(CALLS);
  expect(sequential[1]).toBe(CALLS);
  expect(Number(parallel[4])).toBeLessThan(Number(sequential[4]));
}, 600_000);
