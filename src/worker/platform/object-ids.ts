/**
 * Durable Object ids by name, computed once per isolate: `idFromName` hashes the name each time, and the hot path asks
 * it for the same few names again and again (the session of every request, a session's limits shard per report).
 * An id is a value, not an I/O object, so one computed for one request serves the next. Kept per namespace, at most
 * IDS_KEPT names each (then the map starts again).
 */
const IDS_KEPT = 10_000;
const byNamespace = new WeakMap<DurableObjectNamespace, Map<string, DurableObjectId>>();

export function objectId(namespace: DurableObjectNamespace, name: string): DurableObjectId {
  let ids = byNamespace.get(namespace);
  if (ids === undefined) byNamespace.set(namespace, (ids = new Map()));
  let id = ids.get(name);
  if (id === undefined) {
    id = namespace.idFromName(name);
    if (ids.size >= IDS_KEPT) ids.clear();
    ids.set(name, id);
  }
  return id;
}
