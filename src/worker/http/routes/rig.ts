/**
 * The rig's routes (docs/rig.md): agents, hooks (with ETag, If-Match and Hook-Attempt), the
 * agent's long poll, mail, nudges, the witness's settings, the health report and the `.chipset/state`
 * filesystem contract. Every route needs the `rig` capability (mayor, operator, agent); the rig itself
 * checks which role may make each transition and that an agent touches only its own hook.
 */
import { Hono } from "hono";
import type { Actor, HookView, Transition } from "../../../rig/index.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { Problem } from "../../problems.js";
import {
  agentId,
  attemptBody,
  completeBody,
  ifMatch,
  mailBody,
  mailQuery,
  registerBody,
  setHookBody,
  waitQuery,
  witnessPatch,
} from "../rig-schemas.js";
import { emptyBody, idString, noQuery, parse } from "../../schemas.js";
import { body, query, run, session, type AppContext } from "./shared.js";

export const rigRoutes = new Hono<AppEnv>();

function actor(c: AppContext): Actor {
  const claims = c.get("claims");
  switch (claims.role) {
    case "agent":
      if (claims.agent === undefined)
        throw new Problem("unauthorized", "an agent token carries its agent id", "token.agent");
      return { role: "agent", agent: claims.agent };
    case "mayor":
    case "operator":
    case "client":
      return { role: claims.role };
    case "user":
      throw new Problem("forbidden", "end users (role user) do not use the rig's routes");
    default: {
      const never: never = claims.role;
      throw new Problem("forbidden", `unknown role ${String(never)}`);
    }
  }
}

function agentParam(c: AppContext): string {
  return parse(agentId, c.req.param("agentId"), "invalid_id", "agentId");
}

/** The agent an agent token names (the `.../rig/hook` routes act on the caller's own hook). */
function ownAgent(c: AppContext): string {
  const who = actor(c);
  if (who.role !== "agent")
    throw new Problem("forbidden", `${who.role} tokens have no own hook: use .../rig/agents/{agent_id}/hook`);
  return parse(agentId, who.agent, "invalid_id", "token.agent");
}

/** A hook response: the document's record as the body, its version as ETag, the attempt as Hook-Attempt. */
function hookResponse(c: AppContext, view: HookView, status: 200 | 201 = 200): Response {
  c.header("ETag", `"${view.version}"`);
  c.header("Hook-Attempt", String(view.attempt));
  return c.json(view.hook, status);
}

/** A hook read (GET): the hook file and, when the witness nudged the agent for this bead, `nudges`. */
function hookReadResponse(c: AppContext, view: HookView): Response {
  c.header("ETag", `"${view.version}"`);
  c.header("Hook-Attempt", String(view.attempt));
  return c.json(view.nudges === undefined ? view.hook : { ...view.hook, nudges: view.nudges }, 200);
}

async function transition(
  c: AppContext,
  agent: string,
  name: Transition,
  request: { attempt?: number; summary?: string; work?: { bead_id: string; title: string } },
): Promise<Response> {
  const stub = session(c);
  const condition = ifMatch(c.req.header("if-match"));
  const result = await run(
    stub.op("rigTransition", actor(c), agent, name, {
      ...request,
      ...(condition === undefined ? {} : { ifMatch: condition }),
    }),
  );
  return hookResponse(c, result);
}

rigRoutes.put("/:session/rig/agents/:agentId", requires("rig"), async (c) => {
  const stub = session(c);
  const id = agentParam(c);
  query(c, noQuery);
  const request = await body(c, registerBody);
  const result = await run(stub.op("rigRegister", actor(c), id, request));
  return c.json(result, result.created ? 201 : 200);
});

rigRoutes.get("/:session/rig/agents", requires("rig"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const who = actor(c);
  if (who.role === "agent")
    throw new Problem("forbidden", "agents read their own hook (GET .../rig/hook), not the agent list");
  const agents = await run(stub.op("rigAgents", who));
  const health = await run(stub.op("rigHealth", c.req.param("session")));
  const stalled = new Map(health.stalledDetails.map((d) => [d.agentId, d]));
  return c.json({
    agents: agents.map((a) => ({
      ...a.agent,
      hook: a.hook.hook,
      attempt: a.hook.attempt,
      version: a.hook.version,
      ...(a.hook.summary === undefined ? {} : { summary: a.hook.summary }),
      health:
        a.agent.terminated !== undefined
          ? "terminated"
          : stalled.has(a.agent.agent_id)
            ? "stalled"
            : a.hook.hook.status === "active"
              ? "active"
              : a.hook.hook.status === "pending"
                ? "pending"
                : "idle",
    })),
  });
});

rigRoutes.delete("/:session/rig/agents/:agentId", requires("rig"), async (c) => {
  const stub = session(c);
  const id = agentParam(c);
  query(c, noQuery);
  return c.json(await run(stub.op("rigDeregister", actor(c), id)));
});

rigRoutes.post("/:session/rig/agents/:agentId/terminate", requires("rig"), async (c) => {
  const stub = session(c);
  const id = agentParam(c);
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  return c.json(await run(stub.op("rigTerminate", actor(c), id)));
});

rigRoutes.get("/:session/rig/agents/:agentId/hook", requires("rig"), async (c) => {
  const stub = session(c);
  const id = agentParam(c);
  const q = query(c, waitQuery);
  return hookReadResponse(c, await run(stub.op("rigHook", actor(c), id, (q.wait ?? 0) * 1000)));
});

rigRoutes.put("/:session/rig/agents/:agentId/hook", requires("rig"), async (c) => {
  const id = agentParam(c);
  query(c, noQuery);
  const work = await body(c, setHookBody);
  return transition(c, id, "set", { work });
});

rigRoutes.delete("/:session/rig/agents/:agentId/hook", requires("rig"), async (c) => {
  const id = agentParam(c);
  query(c, noQuery);
  return transition(c, id, "clear", {});
});

rigRoutes.get("/:session/rig/hook", requires("rig"), async (c) => {
  const stub = session(c);
  const q = query(c, waitQuery);
  const id = ownAgent(c);
  return hookReadResponse(c, await run(stub.op("rigHook", actor(c), id, (q.wait ?? 0) * 1000)));
});

for (const name of ["activate", "touch"] as const) {
  rigRoutes.post(`/:session/rig/hook/${name}`, requires("rig"), async (c) => {
    query(c, noQuery);
    const id = ownAgent(c);
    // An empty body is read as `{}`, so a missing attempt is a 400 naming `attempt`.
    const request = await body(c, attemptBody, { optional: true });
    return transition(c, id, name, { attempt: request.attempt });
  });
}

rigRoutes.post("/:session/rig/hook/complete", requires("rig"), async (c) => {
  query(c, noQuery);
  const id = ownAgent(c);
  const request = await body(c, completeBody, { optional: true });
  return transition(c, id, "complete", {
    attempt: request.attempt,
    ...(request.summary === undefined ? {} : { summary: request.summary }),
  });
});

rigRoutes.get("/:session/rig/mail", requires("rig"), async (c) => {
  const stub = session(c);
  const q = query(c, mailQuery);
  return c.json(
    await run(
      stub.op("rigMail", actor(c), {
        ...(q.after === undefined ? {} : { after: q.after }),
        ...(q.limit === undefined ? {} : { limit: q.limit }),
      }),
    ),
  );
});

rigRoutes.post("/:session/rig/mail", requires("rig"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const request = await body(c, mailBody);
  return c.json(await run(stub.op("rigSend", actor(c), request.to, request.payload as never)), 201);
});

rigRoutes.post("/:session/rig/mail/:mailId/ack", requires("rig"), async (c) => {
  const stub = session(c);
  const id = parse(idString, c.req.param("mailId"), "invalid_id", "mailId");
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  return c.json(await run(stub.op("rigAck", actor(c), id)));
});

rigRoutes.get("/:session/rig/nudges", requires("rig"), async (c) => {
  const stub = session(c);
  const q = query(c, waitQuery);
  ownAgent(c);
  return c.json({ nudges: await run(stub.op("rigNudges", actor(c), (q.wait ?? 0) * 1000)) });
});

rigRoutes.get("/:session/rig/witness", requires("rig"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  return c.json(await run(stub.op("rigSettings")));
});

rigRoutes.patch("/:session/rig/witness", requires("rig"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const patch = await body(c, witnessPatch);
  return c.json(await run(stub.op("rigPatchSettings", actor(c), patch)));
});

rigRoutes.get("/:session/rig/health", requires("rig"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const who = actor(c);
  if (who.role === "agent") throw new Problem("forbidden", "the health report is for the mayor and operators");
  return c.json(await run(stub.op("rigHealth", c.req.param("session"))));
});

rigRoutes.get("/:session/rig/chipset/state/hooks/:file", requires("rig"), async (c) => {
  const stub = session(c);
  const file = c.req.param("file");
  if (!file.endsWith(".json")) throw new Problem("route_not_found", "hook files are named {agent_id}.json");
  const id = parse(agentId, file.slice(0, -".json".length), "invalid_id", "agentId");
  query(c, noQuery);
  const text = await run(stub.op("rigHookFile", actor(c), id));
  return c.body(text, 200, { "content-type": "application/json" });
});

rigRoutes.get("/:session/rig/chipset/state", requires("rig"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const archive = await run(stub.op("rigExport", actor(c)));
  return c.body(archive as Uint8Array<ArrayBuffer>, 200, {
    "content-type": "application/x-tar",
    "content-disposition": 'attachment; filename="chipset-state.tar"',
  });
});
