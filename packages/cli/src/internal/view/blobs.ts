/**
 * The blobs a timeline page shows (large tool results and texts), read from the session's store.
 *
 * @example
 * ```ts
 * const texts = yield* Blobs.fetch(store, Details.allBlobs(timeline.marks))
 * texts.get(hash) // the first 64 KiB of the blob, as text
 * ```
 */
import type { EventLog } from "@musekit/core"
import { Effect } from "effect"

/** Largest part of a blob a page holds (a mark's details cut it further). */
export const BLOB_MAX = 64 * 1024

/** The text of `hashes` (a blob the store cannot give is left out; the details say it is missing). */
export const fetch = (store: EventLog.StoreService, hashes: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(
      hashes,
      (h) =>
        store.getBlob(h).pipe(
          Effect.map((bytes) => [h, new TextDecoder().decode(bytes.subarray(0, BLOB_MAX))] as const),
          Effect.orElseSucceed(() => undefined)
        ),
      { concurrency: 8 }
    ),
    (pairs) => new Map(pairs.filter((p): p is readonly [string, string] => p !== undefined))
  )
