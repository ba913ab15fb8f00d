/**
 * @musekit/pg — MuseKit beyond one machine: the event log, blobs and checkpoints in Postgres.
 *
 * @example
 * ```ts
 * import { EventLogPg } from "@musekit/pg"
 * import { SessionRuntime } from "@musekit/node"
 * ```
 */

export * as BlobStore from "./BlobStore.js"
export * as EventLogPg from "./EventLogPg.js"
