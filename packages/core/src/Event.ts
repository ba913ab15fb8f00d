/**
 * The event envelope: one record of the append-only session log.
 *
 * Every model call, tool run, approval, file change, crew message and user input is an `Event`.
 * The envelope is a public, versioned format (see `docs/event-format.md`); `data` is free-form per
 * `type`, and types this version does not know are kept and passed through unchanged.
 *
 * @example
 * ```ts
 * import { Event } from "@musekit/core"
 *
 * const draft: Event.Draft = { agent: "main", type: "user.message", data: { text: "fix the build" } }
 * const line = Event.encodeLine({ v: Event.FORMAT_VERSION, seq: 0, id: "e0", at: 0, parent: null, ...draft })
 * // '{"v":1,"seq":0,"id":"e0","at":0,"agent":"main","parent":null,"type":"user.message","data":{"text":"fix the build"}}'
 * ```
 */
import { Schema } from "effect"

/** Format version written by this release. Readers accept this version and older ones. */
export const FORMAT_VERSION = 1

/** The envelope schema. Field order is fixed: it is the byte order of the JSONL line. */
export class Event extends Schema.Class<Event>("@musekit/core/Event")({
  v: Schema.Number,
  seq: Schema.Number,
  id: Schema.String,
  at: Schema.Number,
  agent: Schema.String,
  parent: Schema.NullOr(Schema.String),
  type: Schema.String,
  data: Schema.Unknown
}) {}

/** A plain envelope (what is actually passed around; `Event` instances are not required). */
export interface Envelope {
  readonly v: number
  readonly seq: number
  readonly id: string
  readonly at: number
  readonly agent: string
  readonly parent: string | null
  readonly type: string
  readonly data: unknown
}

/** What a caller hands to `EventLog.append`; the log assigns `v`, `seq`, `id` and `at`. */
export interface Draft {
  readonly agent: string
  readonly type: string
  readonly data: unknown
  readonly parent?: string | null | undefined
}

/** Schema that validates a decoded JSON value as an envelope (used by readers of foreign logs). */
export const EnvelopeSchema = Schema.Struct({
  v: Schema.Number,
  seq: Schema.Int.pipe(Schema.nonNegative()),
  id: Schema.String,
  at: Schema.Number,
  agent: Schema.String,
  parent: Schema.NullOr(Schema.String),
  type: Schema.String,
  data: Schema.Unknown
})

/** Deterministic event id for a sequence number. Ids are unique within a session. */
export const idFor = (seq: number): string => `e${seq}`

/** Serialize an envelope to its canonical JSON (fixed key order, no trailing newline). */
export const encodeLine = (e: Envelope): string =>
  `{"v":${e.v},"seq":${e.seq},"id":${JSON.stringify(e.id)},"at":${e.at},"agent":${JSON.stringify(e.agent)},"parent":${
    e.parent === null ? "null" : JSON.stringify(e.parent)
  },"type":${JSON.stringify(e.type)},"data":${canonicalJson(e.data)}}`

/**
 * JSON with object keys in insertion order and `undefined` dropped, like `JSON.stringify`, with
 * bigints written as decimal strings and non-finite numbers as `null`; a cycle throws. (The log
 * refuses data that would not survive a round trip, such as functions, before assigning a seq.)
 */
export const canonicalJson = (value: unknown): string => {
  const v = value === undefined ? null : value
  // Plain `JSON.stringify` already writes non-finite numbers as `null` and differs from the
  // replacer only by throwing on a bigint; without a replacer it is several times faster, so it is
  // tried first. (A cycle throws from both.)
  try {
    return JSON.stringify(v)
  } catch {
    return JSON.stringify(v, canonicalReplacer)
  }
}

const canonicalReplacer = (_k: string, v: unknown): unknown => {
  if (typeof v === "bigint") return v.toString()
  if (typeof v === "number" && !Number.isFinite(v)) return null
  return v
}

/** Parse one envelope from a JSON value; `undefined` when it is not an envelope. */
export const fromJson = (u: unknown): Envelope | undefined => {
  if (typeof u !== "object" || u === null) return undefined
  const o = u as Record<string, unknown>
  if (
    typeof o.v !== "number" ||
    typeof o.seq !== "number" ||
    typeof o.id !== "string" ||
    typeof o.at !== "number" ||
    typeof o.agent !== "string" ||
    (o.parent !== null && typeof o.parent !== "string") ||
    typeof o.type !== "string"
  ) {
    return undefined
  }
  return {
    v: o.v,
    seq: o.seq,
    id: o.id,
    at: o.at,
    agent: o.agent,
    parent: o.parent as string | null,
    type: o.type,
    data: o.data
  }
}

/** The draft part of an envelope: what an agent program produced, independent of where it landed. */
export const toDraft = (e: Envelope): Required<Draft> => ({
  agent: e.agent,
  type: e.type,
  data: e.data,
  parent: e.parent
})
