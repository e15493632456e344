/**
 * The product scenario of `npm run bench:load -- --product` (docs/operations.md "Load"): `wrangler dev --local`
 * driven like a product with end users in browsers:
 *
 * 1. an operator token sets the tenant's limits (default: every user 36 inputs a day, so each user's
 *    40th..37th inputs are refused: the 429 column is expected, `--quota 0` limits nothing);
 * 2. the operator puts a session template `load` (the echo model); 50 users (user tokens: role user,
 *    their own sub) create 200 sessions (4 each) from it (`{ template: "load" }`: users create only so);
 * 3. `--watches` session watches (SSE) stay open through the run and count the commit events they get;
 * 4. 2,000 inputs (40 per user, each with its own Idempotency-Key) are sent at `--concurrency`: each
 *    worker POSTs one input (accept latency), then sends the same request again with `?wait=30` (a
 *    retry: the original acceptance, no second reservation) until its result is final (answer latency:
 *    from the first POST), then takes the next;
 * 5. checks: every accepted input's result is `done` with an answer; every session's transcript holds
 *    each accepted input exactly once and no refused one; GET /v1/usage counts exactly the accepted
 *    inputs per user; each user got exactly `40 - quota` refusals, each `user.inputsPerDay`.
 *
 * Prints a plain table (accepts/s, p50/p99 accept and answer latency, 429s, watch events) and PASS or
 * FAIL; exits non-zero on failure. Flags: --users 50 --sessions 200 --inputs 2000 --concurrency 16
 * --watches 20 --quota 36. Its default run takes a few minutes on two cores, most of it wrangler dev starting.
 */
import { api, percentile, sleep, startDev, stopDev, token as tenantToken } from "./bench-load-dev.ts";

const TENANT = "bench-load";

interface Planned {
  readonly user: number;
  readonly session: string;
  readonly text: string;
  readonly key: string;
}

interface Outcome {
  readonly planned: Planned;
  readonly status: number;
  readonly acceptMs: number;
  readonly answerMs?: number;
  readonly inputId?: number;
  readonly result?: string;
  readonly field?: string;
  readonly retryAfter?: string | null;
}

/** One open session watch: counts the SSE events it reads until closed. */
function openWatch(base: string, session: string, jwt: string): { events: () => number; close: () => void } {
  const controller = new AbortController();
  let events = 0;
  void (async () => {
    try {
      const response = await fetch(`${base}/v1/sessions/${session}/watch`, {
        headers: { authorization: `Bearer ${jwt}`, accept: "text/event-stream" },
        signal: controller.signal,
      });
      const reader = response.body?.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      while (reader !== undefined) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        const frames = buffer.split("\n\n");
        buffer = frames.pop() ?? "";
        events += frames.filter((frame) => frame.includes("data:")).length;
      }
    } catch {
      // closed
    }
  })();
  return { events: () => events, close: () => controller.abort() };
}

export async function product(args: Map<string, string>): Promise<void> {
  const int = (name: string, fallback: number): number => {
    const value = Number(args.get(name) ?? fallback);
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} is a whole number`);
    return value;
  };
  const USERS = int("users", 50);
  const SESSIONS = int("sessions", 200);
  const INPUTS = int("inputs", 2000);
  const CONCURRENCY = Math.max(1, int("concurrency", 16));
  const WATCHES = int("watches", 20);
  const QUOTA = int("quota", 36);
  const PER_USER = Math.ceil(INPUTS / USERS);
  const token = (claims: Record<string, unknown>): Promise<string> => tenantToken(TENANT, claims);

  const dev = await startDev();
  const base = dev.base;
  const devUpMs = dev.upMs;
  const failures: string[] = [];
  try {
    const operator = await token({ role: "operator" });
    const limits = QUOTA === 0 ? {} : { user: { inputsPerDay: QUOTA } };
    const put = await api(base, "PUT", "/v1/limits", operator, limits);
    if (put.status !== 200) throw new Error(`PUT /v1/limits: ${put.status} ${JSON.stringify(put.json)}`);
    // A user token creates sessions only from one of the tenant's templates (docs/users.md "Templates").
    const template = await api(base, "PUT", "/v1/templates/load", operator, { model: "echo/echo" });
    if (template.status !== 200 && template.status !== 201)
      throw new Error(`PUT /v1/templates/load: ${template.status} ${JSON.stringify(template.json)}`);

    const users = await Promise.all(Array.from({ length: USERS }, (_, u) => token({ role: "user", sub: `user-${u}` })));
    const sessionsOf: string[][] = users.map(() => []);
    const createStart = Date.now();
    const creates = Array.from({ length: SESSIONS }, (_, i) => ({ user: i % USERS, session: `load-${i}` }));
    for (let i = 0; i < creates.length; i += CONCURRENCY) {
      await Promise.all(
        creates.slice(i, i + CONCURRENCY).map(async ({ user, session }) => {
          const created = await api(base, "PUT", `/v1/sessions/${session}`, users[user] ?? "", { template: "load" });
          if (created.status !== 201)
            throw new Error(`PUT ${session}: ${created.status} ${JSON.stringify(created.json)}`);
          sessionsOf[user]?.push(session);
        }),
      );
    }
    const createMs = Date.now() - createStart;

    const watches = Array.from({ length: Math.min(WATCHES, SESSIONS) }, (_, i) => {
      const { user, session } = creates[i] ?? { user: 0, session: "" };
      return openWatch(base, session, users[user] ?? "");
    });

    // Each user's inputs spread over its sessions; interleaved across users so every user is active throughout.
    const plan: Planned[] = [];
    for (let n = 0; n < PER_USER; n++) {
      for (let u = 0; u < USERS && plan.length < INPUTS; u++) {
        const own = sessionsOf[u] ?? [];
        plan.push({ user: u, session: own[n % own.length] ?? "", text: `input ${n} of user ${u}`, key: `u${u}-n${n}` });
      }
    }
    const outcomes: Outcome[] = [];
    let next = 0;
    const runStart = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < plan.length) {
          const planned = plan[next++];
          if (planned === undefined) break;
          const jwt = users[planned.user] ?? "";
          const sent = Date.now();
          const accepted = await api(
            base,
            "POST",
            `/v1/sessions/${planned.session}/conversations/root/inputs`,
            jwt,
            { input: planned.text },
            { "idempotency-key": planned.key },
          );
          const acceptMs = Date.now() - sent;
          if (accepted.status !== 201) {
            outcomes.push({
              planned,
              status: accepted.status,
              acceptMs,
              field: String(accepted.json["field"] ?? accepted.json["code"] ?? ""),
              retryAfter: accepted.headers.get("retry-after"),
            });
            continue;
          }
          const inputId = Number(accepted.json["inputId"]);
          let result = String(accepted.json["status"]);
          // The answer: the same request again (its Idempotency-Key: the original acceptance, no second
          // reservation) waiting on the server for the result, so no client polls.
          while (result !== "done" && result !== "unanswered") {
            const waited = await api(
              base,
              "POST",
              `/v1/sessions/${planned.session}/conversations/root/inputs?wait=30`,
              jwt,
              { input: planned.text },
              { "idempotency-key": planned.key },
            );
            if (
              waited.status !== 200 ||
              waited.json["duplicate"] !== true ||
              Number(waited.json["inputId"]) !== inputId
            ) {
              result = `retry answered ${waited.status} ${JSON.stringify(waited.json).slice(0, 200)}`;
              break;
            }
            result = String(waited.json["status"]);
          }
          outcomes.push({ planned, status: 201, acceptMs, answerMs: Date.now() - sent, inputId, result });
        }
      }),
    );
    const runMs = Date.now() - runStart;
    await sleep(500);
    const watchEvents = watches.reduce((n, w) => n + w.events(), 0);
    for (const watch of watches) watch.close();

    // Checks --------------------------------------------------------------------------------------
    const accepted = outcomes.filter((o) => o.status === 201);
    const refused = outcomes.filter((o) => o.status === 429);
    const other = outcomes.filter((o) => o.status !== 201 && o.status !== 429);
    if (outcomes.length !== plan.length) failures.push(`${plan.length} inputs planned, ${outcomes.length} sent`);
    if (other.length > 0)
      failures.push(
        `${other.length} inputs answered neither 201 nor 429 (first: ${other[0]?.status} ${other[0]?.field})`,
      );
    const notDone = accepted.filter((o) => o.result !== "done");
    if (notDone.length > 0)
      failures.push(`${notDone.length} accepted inputs did not end done (first: ${notDone[0]?.result})`);
    if (refused.some((o) => o.field !== "user.inputsPerDay" || o.retryAfter === null))
      failures.push("a 429 did not name user.inputsPerDay or had no Retry-After");
    const expectedRefusals = QUOTA === 0 ? 0 : Math.max(0, PER_USER - QUOTA) * USERS;
    if (refused.length !== expectedRefusals) failures.push(`${refused.length} refusals, expected ${expectedRefusals}`);

    // Every accepted input exactly once in its session's transcript, no refused one at all.
    const texts = new Map<string, Map<string, number>>();
    for (const { user, session } of creates) {
      const counts = new Map<string, number>();
      let after = 0;
      for (;;) {
        const page = await api(
          base,
          "GET",
          `/v1/sessions/${session}/conversations/root/entries?kind=user&limit=1000&after=${after}`,
          users[user] ?? "",
        );
        const items =
          (page.json["items"] as { id: number; kind: string; model?: { content?: unknown }[] }[] | undefined) ?? [];
        for (const entry of items) {
          const content = entry.model?.[0]?.content;
          const text =
            typeof content === "string"
              ? content
              : Array.isArray(content)
                ? content.map((b: { text?: string }) => b.text ?? "").join("")
                : "";
          counts.set(text, (counts.get(text) ?? 0) + 1);
        }
        const next = page.json["next"];
        if (typeof next !== "number") break;
        after = next;
      }
      texts.set(session, counts);
    }
    const seen = (o: Outcome): number => texts.get(o.planned.session)?.get(o.planned.text) ?? 0;
    const wrongAccepted = accepted.filter((o) => seen(o) !== 1);
    const wrongRefused = refused.filter((o) => seen(o) !== 0);
    if (wrongAccepted.length > 0)
      failures.push(
        `${wrongAccepted.length} accepted inputs are not exactly once in their transcript (first: ${wrongAccepted[0]?.planned.text}: ${wrongAccepted[0] === undefined ? 0 : seen(wrongAccepted[0])})`,
      );
    if (wrongRefused.length > 0) failures.push(`${wrongRefused.length} refused inputs are in a transcript`);

    // Metering agrees with what was accepted, per user.
    const usage = await api(base, "GET", "/v1/usage", operator);
    const metered = new Map<string, number>();
    for (const day of (usage.json["items"] as { sub: string | null; inputs: number }[] | undefined) ?? [])
      metered.set(day.sub ?? "(tenant)", (metered.get(day.sub ?? "(tenant)") ?? 0) + day.inputs);
    if (QUOTA !== 0) {
      for (let u = 0; u < USERS; u++) {
        const mine = accepted.filter((o) => o.planned.user === u).length;
        if ((metered.get(`user-${u}`) ?? 0) !== mine)
          failures.push(`user-${u}: ${mine} accepted, ${metered.get(`user-${u}`) ?? 0} metered`);
      }
      if ((metered.get("(tenant)") ?? 0) !== accepted.length)
        failures.push(`tenant: ${accepted.length} accepted, ${metered.get("(tenant)") ?? 0} metered`);
    }

    // The table ------------------------------------------------------------------------------------
    const acceptLatency = outcomes.map((o) => o.acceptMs);
    const answerLatency = accepted.flatMap((o) => (o.answerMs === undefined ? [] : [o.answerMs]));
    const rows: [string, string][] = [
      ["wrangler dev up", `${(devUpMs / 1000).toFixed(1)} s`],
      ["users / sessions", `${USERS} / ${SESSIONS} (created in ${(createMs / 1000).toFixed(1)} s)`],
      ["inputs / concurrency", `${plan.length} / ${CONCURRENCY}`],
      ["limits", QUOTA === 0 ? "none" : `user.inputsPerDay ${QUOTA}`],
      ["run", `${(runMs / 1000).toFixed(1)} s`],
      ["accepted (201)", String(accepted.length)],
      ["refused (429)", String(refused.length)],
      ["other statuses", String(other.length)],
      ["accepts/s", (accepted.length / (runMs / 1000)).toFixed(1)],
      ["accept p50 / p99", `${percentile(acceptLatency, 50)} / ${percentile(acceptLatency, 99)} ms`],
      ["answer p50 / p99", `${percentile(answerLatency, 50)} / ${percentile(answerLatency, 99)} ms`],
      ["open watches / events", `${watches.length} / ${watchEvents}`],
      ["each input one result", failures.length === 0 ? "yes" : "NO"],
    ];
    const width = Math.max(...rows.map(([name]) => name.length));
    process.stdout.write(
      `\nbench:load (wrangler dev --local, echo model)\n${rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`).join("\n")}\n`,
    );
  } finally {
    await stopDev(dev);
  }
  if (failures.length > 0) {
    process.stdout.write(`FAIL\n${failures.map((f) => `  ${f}`).join("\n")}\n`);
    process.exit(1);
  }
  process.stdout.write("PASS\n");
}
