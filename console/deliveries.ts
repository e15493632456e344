/**
 * The console's deliveries view (docs/console.md, docs/integrations.md "Events out"): the open
 * session's recent event deliveries to one of the tenant's webhook endpoints, with their status,
 * attempts, last status code and next attempt, and a retry button on pending and dead ones. It reads
 * `GET /v1/webhook-endpoints` and `GET .../deliveries?endpoint=` (operator tokens) while the tab is
 * open, refreshing every few seconds: attempts are not commits, so no watch shows them.
 */
import type { DeliveryResponse, EndpointResponse } from "../src/api/webhook-endpoints.js";
import { el } from "./dom.js";

export type Api = <T>(method: string, path: string, body?: unknown) => Promise<T>;

const REFRESH_MS = 3000;
/** How many of the newest deliveries the tab shows. */
const SHOWN = 50;

export interface DeliveriesTarget {
  readonly endpoint: HTMLSelectElement;
  readonly status: HTMLSelectElement;
  readonly table: HTMLElement;
}

function clock(iso: string | null): string {
  if (iso === null) return "";
  const time = Date.parse(iso);
  return Number.isNaN(time) ? iso : new Date(time).toLocaleTimeString();
}

export class DeliveriesView {
  readonly #api: Api;
  readonly #report: (error: unknown) => void;
  readonly #target: DeliveriesTarget;
  #session: string | undefined;
  #generation = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(api: Api, report: (error: unknown) => void, target: DeliveriesTarget) {
    this.#api = api;
    this.#report = report;
    this.#target = target;
    target.endpoint.addEventListener("change", () => this.#again());
    target.status.addEventListener("change", () => this.#again());
  }

  /** Show `sessionPath`'s deliveries, refreshing until `close`. */
  open(sessionPath: string): void {
    this.close();
    this.#session = sessionPath;
    this.#target.table.replaceChildren(el("tr", "loading…"));
    void this.#refresh(++this.#generation, true);
  }

  close(): void {
    this.#generation++;
    this.#session = undefined;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #again(): void {
    const session = this.#session;
    if (session !== undefined) this.open(session);
  }

  async #endpoints(): Promise<void> {
    const { items } = await this.#api<{ items: EndpointResponse[] }>("GET", "/v1/webhook-endpoints");
    const chosen = this.#target.endpoint.value;
    this.#target.endpoint.replaceChildren(
      el("option", "every endpoint", { value: "" }),
      ...items.map((endpoint) =>
        el("option", `${endpoint.url}${endpoint.enabled ? "" : " (disabled)"}`, { value: endpoint.id }),
      ),
    );
    if (items.some((endpoint) => endpoint.id === chosen)) this.#target.endpoint.value = chosen;
  }

  async #refresh(generation: number, endpoints: boolean): Promise<void> {
    const session = this.#session;
    if (session === undefined) return;
    try {
      if (endpoints) await this.#endpoints();
      const params = new URLSearchParams({ limit: String(SHOWN) });
      if (this.#target.endpoint.value !== "") params.set("endpoint", this.#target.endpoint.value);
      if (this.#target.status.value !== "") params.set("status", this.#target.status.value);
      const { items } = await this.#api<{ items: DeliveryResponse[] }>("GET", `${session}/deliveries?${params}`);
      if (generation === this.#generation) this.#render(session, items);
    } catch (error) {
      if (generation === this.#generation) this.#report(error);
    }
    if (generation === this.#generation)
      this.#timer = setTimeout(() => void this.#refresh(generation, false), REFRESH_MS);
  }

  #render(session: string, items: readonly DeliveryResponse[]): void {
    const head = el("tr", "");
    for (const name of ["event", "type", "status", "attempts", "last status", "next attempt", ""])
      head.append(el("th", name));
    const rows = items.map((delivery) => {
      const row = el("tr", "", { "data-delivery": delivery.id, "data-status": delivery.status });
      const cell = (text: string, name: string): void => void row.append(el("td", text, { "data-field": name }));
      cell(delivery.eventId, "event");
      cell(delivery.type, "type");
      cell(delivery.status, "status");
      cell(String(delivery.attempts), "attempts");
      cell(
        delivery.lastStatusCode === null ? (delivery.lastError ?? "") : String(delivery.lastStatusCode),
        "last-status",
      );
      cell(clock(delivery.nextAttemptAt), "next-attempt");
      const actions = el("td", "");
      if (delivery.status !== "done") {
        const retry = el("button", "Retry", { "data-retry": delivery.id });
        retry.addEventListener("click", () => {
          void this.#api("POST", `${session}/deliveries/${encodeURIComponent(delivery.id)}/retry`).then(
            () => this.#again(),
            this.#report,
          );
        });
        actions.append(retry);
      }
      row.append(actions);
      return row;
    });
    if (rows.length === 0) {
      const row = el("tr", "");
      row.append(el("td", "no deliveries: no endpoint of the tenant hears this session yet", { colspan: "7" }));
      rows.push(row);
    }
    this.#target.table.replaceChildren(head, ...rows);
  }
}
