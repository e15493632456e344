/**
 * The raw-SQLite floor of bench/turns (docs/performance.md "Cost per turn"): per turn, the rows the
 * harness writes for one turn of the workload (5 entries, 5 tasks with their inflight patches and
 * settlements, two `pi.usage` elements, `pi.usage.totals` twice, `pi.inputResult` placed and done, and
 * the one SELECT of a value not cached), in the same 10 transactions and statement order the harness's
 * SQLite backend issues them (the harness makes 14 commits a turn; 10 of them write rows, the others
 * write nothing durable), with the same SQL text against the same schema (`migrate`), JSON values of the
 * same shapes and sizes, and nothing else: no harness, no records, no caches, no listeners. What the
 * harness costs beyond this is its own JavaScript. Runtime-agnostic (a `SqlHost`: a Durable Object's
 * `ctx.storage` or `NodeSqliteHost`).
 */
import { migrate } from "../../src/storage/migrations.js";
import type { SqlHost, SqlValue } from "../../src/storage/sql.js";

const SELECT_VALUE = `SELECT seq, value FROM "values" WHERE scope = ? AND namespace = ? AND key = ? AND keyless = ?`;
const INSERT_ENTRY = `INSERT INTO entries (id, conversation, kind, key, by_task, head, data, model, edits, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const SET_VALUE = `INSERT INTO "values" (scope, namespace, key, keyless, seq, value) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, namespace, key, keyless) DO UPDATE SET seq = excluded.seq, value = excluded.value`;
const INSERT_TASK = `INSERT INTO tasks (id, conversation, kind, role, background, turn, abort, after, owns, state, status, settled, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const PATCH_TASK = `UPDATE tasks SET role = ?, status = ?, state = ?, abort = max(abort, ?), owns = coalesce(?, owns), last = ? WHERE id = ?`;
const SETTLE_TASK = `UPDATE tasks SET role = 'terminal', status = ?, state = ?, settled = ? WHERE id = ?`;
const INSERT_ELEMENT = `INSERT INTO session_elements (namespace, key, keyless, id, value) VALUES (?, ?, ?, ?, ?)`;

/** Entry kind ids as the harness's `kinds` table numbers them in this workload. */
const USER = 1;
const ASSISTANT = 3;
const TOOL_RESULT = 4;

/** A key as the backend stores it: its UTF-16BE code units. */
function keyBlob(key: string): ArrayBuffer {
  const out = new Uint8Array(key.length * 2);
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    out[i * 2] = c >> 8;
    out[i * 2 + 1] = c & 0xff;
  }
  return out.buffer;
}

const EMPTY_KEY = new ArrayBuffer(0);

export interface FloorRows {
  rowsRead: number;
  rowsWritten: number;
}

/** The floor over one database: `turn(n)` writes turn n's rows. */
export class SqlFloor {
  readonly #host: SqlHost;
  readonly rows: FloorRows = { rowsRead: 0, rowsWritten: 0 };
  #seq = 0;
  #attempts = 0;
  #input = 0;
  #output = 0;

  constructor(host: SqlHost) {
    this.#host = host;
    migrate(host);
    this.#host.sql.exec(`INSERT INTO conversations (id) VALUES (1)`).toArray();
    this.#seq = 1;
  }

  #run(query: string, ...bindings: SqlValue[]): void {
    const cursor = this.#host.sql.exec(query, ...bindings);
    cursor.toArray();
    this.rows.rowsRead += cursor.rowsRead;
    this.rows.rowsWritten += cursor.rowsWritten;
  }

  #tx(fn: () => void): void {
    this.#host.transactionSync(fn);
  }

  #totals(input: number, output: number): string {
    this.#attempts += 1;
    this.#input += input;
    this.#output += output;
    return JSON.stringify({
      attempts: this.#attempts,
      unknown: 0,
      input: this.#input,
      output: this.#output,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: this.#input + this.#output,
      cost: 0,
    });
  }

  /** Write turn `n`'s rows: 10 transactions, 26 statements. */
  turn(n: number): void {
    const s = this.#seq;
    const text = `turn ${n}`;
    const now = Date.now();
    const inputKey = keyBlob(String(s + 1));
    const inputId = s + 1;
    const user = s + 3;
    const gen = s + 6;
    const assistant = s + 8;
    const toolA = s + 9;
    const toolB = s + 10;
    const post = s + 11;
    const resultA = s + 17;
    const resultB = s + 19;
    const gen2 = s + 21;
    const answer = s + 24;
    const config = `"config":{"model":"faux/faux-1","thinking":null,"tools":["echo"],"profile":null,"budgetMs":120000},"retry":{"attempt":0,"maxAttempts":8}`;
    const call = (id: string, t: string): string =>
      `{"type":"toolCall","id":"${id}","name":"echo","arguments":{"text":"${t}"}}`;
    const usage = (input: number, output: number): string =>
      `"api":"faux:${n}:abcdefgh","provider":"faux","model":"faux-1","usage":[${input},${output}]`;
    const context = 8000 + n * 4;

    // Accept: the input's result (not cached: read once), the user entry, the result placed, the generation.
    this.#tx(() => {
      this.#run(SELECT_VALUE, 1, "pi.inputResult", inputKey, 0);
      this.#run(
        INSERT_ENTRY,
        user,
        1,
        USER,
        null,
        null,
        null,
        null,
        `[{"role":"user","content":"${text}","timestamp":${now}}]`,
        null,
        null,
      );
      this.#run(SET_VALUE, 1, "pi.inputResult", inputKey, 0, s + 5, `{"status":"placed","entry":${user}}`);
      this.#run(
        INSERT_TASK,
        gen,
        1,
        "generation",
        "start",
        0,
        1,
        0,
        "[]",
        null,
        `{"inputs":[${inputId}],${config}}`,
        "pending",
        null,
        null,
      );
    });
    // Inflight before the request (§5.3 rule 1).
    this.#tx(() =>
      this.#run(
        PATCH_TASK,
        "inflight",
        "streaming",
        `~{"inputs":[${inputId}],${config},"requestThrough":${user}}`,
        0,
        null,
        s + 7,
        gen,
      ),
    );
    // The assistant with two calls, two tools, post_tools, a usage element and totals, the generation settled.
    this.#tx(() => {
      this.#run(
        INSERT_ENTRY,
        assistant,
        1,
        ASSISTANT,
        null,
        gen,
        null,
        null,
        `~[{"role":"assistant","content":[${call(`a-${text}`, `${text} a`)},${call(`b-${text}`, `${text} b`)}],${usage(context, 14)},"stopReason":"toolUse","timestamp":${now},"durationMs":1}]`,
        null,
        null,
      );
      this.#run(
        INSERT_TASK,
        toolA,
        1,
        "tool",
        "start",
        0,
        1,
        0,
        "[]",
        null,
        `{"call":${call(`a-${text}`, `${text} a`)},"assistant":${assistant}}`,
        "planned",
        null,
        null,
      );
      this.#run(
        INSERT_TASK,
        toolB,
        1,
        "tool",
        "start",
        0,
        1,
        0,
        "[]",
        null,
        `{"call":${call(`b-${text}`, `${text} b`)},"assistant":${assistant}}`,
        "planned",
        null,
        null,
      );
      this.#run(
        INSERT_TASK,
        post,
        1,
        "post_tools",
        "start",
        0,
        1,
        0,
        `[${toolA},${toolB}]`,
        null,
        `{"assistant":${assistant},"tools":[${toolA},${toolB}],"inputs":[${inputId}]}`,
        "waiting",
        null,
        s + 14,
      );
      this.#run(
        INSERT_ELEMENT,
        "pi.usage",
        EMPTY_KEY,
        1,
        s + 12,
        `{"conversationId":1,"taskId":${gen},"model":"faux/faux-1","usage":{"input":${context},"output":14}}`,
      );
      this.#run(SET_VALUE, 0, "pi.usage.totals", EMPTY_KEY, 1, s + 13, this.#totals(context, 14));
      this.#run(
        SETTLE_TASK,
        "done",
        `~{"inputs":[${inputId}],"attempt":1,"assistant":${assistant},"successor":${post}}`,
        s + 14,
        gen,
      );
    });
    // Each tool inflight, then its result entry and settlement.
    for (const [id, tool, at] of [
      ["a", toolA, s + 15],
      ["b", toolB, s + 16],
    ] as const)
      this.#tx(() =>
        this.#run(
          PATCH_TASK,
          "inflight",
          "running",
          `~{"call":${call(`${id}-${text}`, `${text} ${id}`)},"assistant":${assistant},"args":{"text":"${text} ${id}"},"replay":"never"}`,
          0,
          null,
          at,
          tool,
        ),
      );
    for (const [id, tool, result] of [
      ["a", toolA, resultA],
      ["b", toolB, resultB],
    ] as const)
      this.#tx(() => {
        this.#run(
          INSERT_ENTRY,
          result,
          1,
          TOOL_RESULT,
          `${id}-${text}`,
          tool,
          null,
          `{"chars":${text.length + 2}}`,
          `[{"role":"toolResult","toolCallId":"${id}-${text}","toolName":"echo","content":[{"type":"text","text":"${text} ${id}"}],"isError":false,"timestamp":${now}}]`,
          null,
          result + 1,
        );
        this.#run(
          SETTLE_TASK,
          "done",
          `~{"call":{"id":"${id}-${text}","name":"echo"},"assistant":${assistant},"output":{"chars":${text.length + 2}},"result":${result}}`,
          result + 1,
          tool,
        );
      });
    // post_tools: the second generation, post_tools settled.
    this.#tx(() => {
      this.#run(
        INSERT_TASK,
        gen2,
        1,
        "generation",
        "start",
        0,
        1,
        0,
        "[]",
        null,
        `{"inputs":[${inputId}],${config}}`,
        "pending",
        null,
        s + 22,
      );
      this.#run(
        SETTLE_TASK,
        "done",
        `~{"assistant":${assistant},"tools":[${toolA},${toolB}],"inputs":[${inputId}],"successor":${gen2}}`,
        s + 22,
        post,
      );
    });
    this.#tx(() =>
      this.#run(
        PATCH_TASK,
        "inflight",
        "streaming",
        `~{"inputs":[${inputId}],${config},"requestThrough":${resultB}}`,
        0,
        null,
        s + 23,
        gen2,
      ),
    );
    // The answer, its usage, totals, the input's result done, the generation settled.
    this.#tx(() => {
      this.#run(
        INSERT_ENTRY,
        answer,
        1,
        ASSISTANT,
        null,
        gen2,
        null,
        null,
        `~[{"role":"assistant","content":[{"type":"text","text":"Both echoes came back; done."}],${usage(context + 30, 7)},"stopReason":"stop","timestamp":${now},"durationMs":1}]`,
        null,
        s + 28,
      );
      this.#run(
        INSERT_ELEMENT,
        "pi.usage",
        EMPTY_KEY,
        1,
        s + 25,
        `{"conversationId":1,"taskId":${gen2},"model":"faux/faux-1","usage":{"input":${context + 30},"output":7}}`,
      );
      this.#run(SET_VALUE, 0, "pi.usage.totals", EMPTY_KEY, 1, s + 26, this.#totals(context + 30, 7));
      this.#run(
        SET_VALUE,
        1,
        "pi.inputResult",
        inputKey,
        0,
        s + 27,
        `{"status":"done","entry":${user},"answer":${answer}}`,
      );
      this.#run(SETTLE_TASK, "done", `~{"inputs":[${inputId}],"attempt":1,"assistant":${answer}}`, s + 28, gen2);
    });
    this.#seq = s + 28;
  }
}
