export type * from "./records.js";
export { StorageError, type Storage, type StorageErrorCode } from "./storage.js";
export { addressKey, forkSegments, MAX_PAYLOAD_BYTES, MAX_PAGE_LIMIT } from "./shared.js";
