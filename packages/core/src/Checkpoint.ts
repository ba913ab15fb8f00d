/**
 * Checkpoints: the folded state of a session at an idle point (every agent's conversation, the
 * model's prompt prefixes, approvals, the crew, plugin state), kept beside its log. Resuming from a
 * checkpoint restores that state and replays only the events after it, so a long session comes
 * back in about the time its last stretch takes to replay, not the time of the whole log.
 *
 * A checkpoint is an optimization, never the source of truth: it names the seq it was taken at
 * and a hash of that event's line, and a checkpoint that does not match its log (a different or
 * shorter log, a torn or corrupt file) is ignored — resume then replays from the start.
 * `replay --verify` always re-runs the whole log.
 *
 * @example
 * ```ts
 * import { Checkpoint } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * // const text = Checkpoint.encode(Checkpoint.make({ session, at: lastEvent, state }), redactor)
 * // const why = yield* Checkpoint.mismatch(log, Checkpoint.decode(text)) // undefined: usable
 * ```
 */
import { Chunk, Effect, Either, Stream } from "effect"
import * as Event from "./Event.js"
import type * as EventLog from "./EventLog.js"
import type { Checkpoint } from "./EventLog.js"
import { hash53 } from "./Model.js"
import type * as Redactor from "./Redactor.js"

// the checkpoint's shape is declared with the log stores that keep it (`EventLog.Checkpoint`)
export type { Checkpoint } from "./EventLog.js"

export const VERSION: Checkpoint["version"] = 1

/** The hash a checkpoint keeps of the event it was taken at. */
export const checkOf = (event: Event.Envelope): string => hash53(Event.encodeLine(event))

export const make = <S>(options: {
  readonly session: string
  readonly at: Event.Envelope
  readonly state: S
}): Checkpoint<S> => ({
  version: VERSION,
  session: options.session,
  seq: options.at.seq,
  check: checkOf(options.at),
  state: options.state
})

/** The stored text: JSON, redacted like the log (state holds tool results the log keeps redacted). */
export const encode = (checkpoint: Checkpoint, redactor: Redactor.Redactor): string =>
  redactor.redact(JSON.stringify(checkpoint))

/** Parse stored text; `Left` says why it is not a checkpoint. */
export const decode = (text: string): Either.Either<Checkpoint, string> => {
  let u: unknown
  try {
    u = JSON.parse(text)
  } catch (e) {
    return Either.left(`not JSON (${(e as Error).message})`)
  }
  const c = u as Partial<Checkpoint>
  if (typeof u !== "object" || u === null) return Either.left("not an object")
  if (c.version !== VERSION) return Either.left(`format version ${String(c.version)}, expected ${VERSION}`)
  if (typeof c.session !== "string" || typeof c.seq !== "number" || typeof c.check !== "string" || !("state" in c)) {
    return Either.left("missing session, seq, check or state")
  }
  return Either.right(c as Checkpoint)
}

/** The event at `seq`, if the log has it. */
export const eventAt = (
  log: EventLog.Service,
  seq: number
): Effect.Effect<Event.Envelope | undefined, EventLog.EventLogError> =>
  Effect.map(Stream.runCollect(Stream.take(log.read(seq), 1)), (c) => {
    const e = Chunk.head(c)
    return e._tag === "Some" && e.value.seq === seq ? e.value : undefined
  })

/** Why `checkpoint` cannot be used with `log` (`undefined`: it can). */
export const mismatch = (
  log: EventLog.Service,
  checkpoint: Checkpoint
): Effect.Effect<string | undefined, EventLog.EventLogError> =>
  Effect.gen(function* () {
    if (checkpoint.session !== log.sessionId) return `it belongs to session ${checkpoint.session}`
    const last = yield* log.lastSeq
    if (checkpoint.seq > last) return `it was taken at seq ${checkpoint.seq}, the log ends at ${last}`
    const at = yield* eventAt(log, checkpoint.seq)
    if (!at || checkOf(at) !== checkpoint.check) return `the log holds another event at seq ${checkpoint.seq}`
    return undefined
  })
