/**
 * Schedule routes (§8.6): recurring inputs for frontends. A schedule is a background task of the
 * session that accepts `input` into a conversation at every occurrence (`every` ms, or `cron` in a
 * `timezone`), with a request key per occurrence so a redelivered alarm accepts once.
 *
 *   POST   /:session/schedules            create      { conversation?, input, every? | cron?, timezone?, startAt?,
 *   mode?, catchUp? }
 *   GET    /:session/schedules            list        ?all=true includes ended ones; after, limit
 *   GET    /:session/schedules/:id        one
 *   PATCH  /:session/schedules/:id        pause / resume / edit { paused?, input?, mode?, catchUp?, every? | cron?,
 *   timezone? }
 *   DELETE /:session/schedules/:id        end it
 */
import { Hono } from "hono";
import { requires, type AppEnv } from "../../identity/auth.js";
import { noQuery, scheduleBody, schedulePatch, schedulesQuery } from "../../schemas.js";
import { body, idParam, query, run, session } from "./shared.js";

export const scheduleRoutes = new Hono<AppEnv>();

scheduleRoutes.post("/:session/schedules", requires("conversation"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const b = await body(c, scheduleBody);
  const view = await run(
    stub.op("createSchedule", {
      conversation: b.conversation ?? "root",
      input: b.input,
      ...(b.every === undefined ? {} : { every: b.every }),
      ...(b.cron === undefined ? {} : { cron: b.cron }),
      ...(b.timezone === undefined ? {} : { timezone: b.timezone }),
      ...(b.startAt === undefined ? {} : { startAt: b.startAt }),
      ...(b.mode === undefined ? {} : { mode: b.mode }),
      ...(b.catchUp === undefined ? {} : { catchUp: b.catchUp }),
    }),
  );
  return c.json(view, 201);
});

scheduleRoutes.get("/:session/schedules", requires("conversation"), async (c) => {
  const stub = session(c);
  const q = query(c, schedulesQuery);
  return c.json(
    await run(
      stub.op("schedules", {
        ...(q.all === undefined ? {} : { all: q.all === "true" }),
        ...(q.after === undefined ? {} : { after: q.after }),
        ...(q.limit === undefined ? {} : { limit: q.limit }),
      }),
    ),
  );
});

scheduleRoutes.get("/:session/schedules/:scheduleId", requires("conversation"), async (c) => {
  const stub = session(c);
  const id = idParam(c, "scheduleId");
  query(c, noQuery);
  return c.json(await run(stub.op("schedule", id)));
});

scheduleRoutes.patch("/:session/schedules/:scheduleId", requires("conversation"), async (c) => {
  const stub = session(c);
  const id = idParam(c, "scheduleId");
  query(c, noQuery);
  const b = await body(c, schedulePatch);
  return c.json(
    await run(
      stub.op("patchSchedule", id, {
        ...(b.paused === undefined ? {} : { paused: b.paused }),
        ...(b.input === undefined ? {} : { input: b.input }),
        ...(b.mode === undefined ? {} : { mode: b.mode }),
        ...(b.catchUp === undefined ? {} : { catchUp: b.catchUp }),
        ...(b.every === undefined ? {} : { every: b.every }),
        ...(b.cron === undefined ? {} : { cron: b.cron }),
        ...(b.timezone === undefined ? {} : { timezone: b.timezone }),
      }),
    ),
  );
});

scheduleRoutes.delete("/:session/schedules/:scheduleId", requires("conversation"), async (c) => {
  const stub = session(c);
  const id = idParam(c, "scheduleId");
  query(c, noQuery);
  return c.json(await run(stub.op("deleteSchedule", id)));
});
