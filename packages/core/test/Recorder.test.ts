import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, FastCheck as fc } from "effect"
import { type Event, EventLog, Recorder, Redactor } from "../src/index.js"

/** The comparison replay made before it compared member by member: one key string per side. */
const referenceJson = (value: unknown): string =>
  JSON.stringify(value === undefined ? null : value, (_k, v) => {
    if (typeof v === "bigint") return v.toString()
    if (typeof v === "number" && !Number.isFinite(v)) return null
    return v
  })
const referenceStrip = (data: unknown): unknown => {
  if (typeof data !== "object" || data === null || !(Recorder.OBSERVED in data)) return data
  const { [Recorder.OBSERVED]: _, ...rest } = data as Record<string, unknown>
  return rest
}
const referenceKey = (d: Event.Draft, redactor: Redactor.Redactor) =>
  `${d.agent}\u0000${d.parent ?? ""}\u0000${d.type}\u0000${redactor.redact(referenceJson(referenceStrip(d.data)))}`

const envelope = (draft: Event.Draft, seq = 0): Event.Envelope => ({
  v: 1,
  seq,
  id: `e${seq}`,
  at: 0,
  agent: draft.agent,
  parent: draft.parent ?? null,
  type: draft.type,
  data: draft.data
})

/**
 * Replay `draft` against one recorded event: `true` when it matches, `false` on a divergence,
 * `"dies"` when the data cannot be compared at all (not JSON).
 */
const matches = (draft: Event.Draft, recorded: Event.Envelope, redactor: Redactor.Redactor) => {
  const rec = Recorder.makeReplay({ events: [recorded], mode: "replay", redactor })
  const exit = Effect.runSyncExit(rec.append(draft))
  if (Exit.isSuccess(exit)) return true
  if (exit.cause._tag === "Fail" && exit.cause.error._tag === "Divergence") return false
  if (exit.cause._tag === "Die") return "dies"
  throw new Error(`unexpected: ${String(exit.cause)}`)
}

const referenceMatches = (draft: Event.Draft, recorded: Event.Envelope, redactor: Redactor.Redactor) => {
  try {
    return referenceKey(draft, redactor) === referenceKey(recorded, Redactor.none)
  } catch {
    return "dies"
  }
}

const SECRET = "hunter2-hunter2-hunter2"
const redactors: ReadonlyArray<readonly [string, Redactor.Redactor]> = [
  ["none", Redactor.none],
  ["patterns", Redactor.make()],
  ["a secret", Redactor.make({ secrets: { APP_TOKEN: SECRET } })],
  ["a secret of digits", Redactor.make({ secrets: { PIN_SECRET: "12345678" } })],
  // punctuation in a secret: it could span two JSON tokens, so nothing is decided without the text
  ["a secret with quotes", Redactor.make({ secrets: { ODD_SECRET: 'a"b,c:d{e}' } })]
]

const text = fc.oneof(
  fc.string({ maxLength: 8 }),
  // pieces of credential shapes next to characters JSON escapes
  fc
    .array(
      fc.constantFrom("sk-", "AKIA", "xox", "b-", "ABCDEFGHIJ", "0123456789", "\n", '"', "\\", "\u0001", "\ud800", " "),
      {
        maxLength: 8
      }
    )
    .map((pieces) => pieces.join("")),
  fc.constantFrom(
    "sk-abcdefghijklmnopqrstuvwxyz012345",
    "AKIAABCDEFGHIJKLMNOP",
    SECRET,
    `x ${SECRET} y`,
    "12345678",
    'a"b,c:d{e}',
    "line\nbreak",
    'quote " and \\ backslash',
    "\u0001\ud800",
    "observed",
    "null"
  )
)

const leaf = fc.oneof(
  text,
  fc.integer(),
  fc.constantFrom(0, -0, 1.5, 123456789, 1e21, Number.NaN, Number.POSITIVE_INFINITY),
  fc.bigInt({ min: -(10n ** 12n), max: 10n ** 12n }),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.constant(new Date(0)),
  fc.constant(() => 1)
)

const value = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small" }, leaf, tie("array"), tie("object")),
  array: fc.array(tie("value"), { maxLength: 4 }),
  object: fc.dictionary(text, tie("value"), { maxKeys: 4 })
})).value

/** A copy member by member (same key order), as another part of a program would build it. */
const copy = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.map(copy)
  if (typeof v === "object" && v !== null && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, copy(x)]))
  }
  return v
}

/** Data as a recorded log holds it: written redacted, read back as JSON (when it is JSON at all). */
const asRecorded = (v: unknown, redactor: Redactor.Redactor): unknown => {
  const json = referenceJson(v)
  if (typeof json !== "string") return v
  try {
    return JSON.parse(redactor.redact(json))
  } catch {
    return JSON.parse(json)
  }
}

const mutate = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.length > 0 ? [...v.slice(1)] : [1]
  if (typeof v === "object" && v !== null) {
    const keys = Object.keys(v)
    return keys.length > 1 ? Object.fromEntries(Object.entries(v).reverse()) : { ...v, extra: 1 }
  }
  return typeof v === "string" ? `${v}!` : typeof v === "number" ? v + 1 : "other"
}

describe("Recorder.makeReplay", () => {
  it("matches a draft against the log exactly as comparing the two key strings did", () => {
    fc.assert(
      fc.property(
        value,
        fc.constantFrom("same", "copy", "recorded", "mutated", "observed"),
        fc.integer({ min: 0, max: redactors.length - 1 }),
        fc.constantFrom<string | null | undefined>(null, undefined, "e1"),
        (data, how, r, parent) => {
          const redactor = redactors[r]![1]
          const recordedData =
            how === "same"
              ? data
              : how === "copy"
                ? copy(data)
                : how === "recorded"
                  ? asRecorded(data, redactor)
                  : how === "mutated"
                    ? mutate(copy(data))
                    : typeof data === "object" && data !== null && !Array.isArray(data)
                      ? { ...(copy(data) as object), observed: { at: 1 } }
                      : data
          const draft: Event.Draft = { agent: "main", type: "x.happened", parent, data }
          const recorded = envelope({ agent: "main", type: "x.happened", parent: parent ?? null, data: recordedData })
          expect(matches(draft, recorded, redactor)).toBe(referenceMatches(draft, recorded, redactor))
        }
      ),
      { numRuns: 3_000 }
    )
  })

  it("compares agent, parent and type before data", () => {
    const draft: Event.Draft = { agent: "main", type: "tool.started", parent: "e3", data: { a: 1 } }
    expect(matches(draft, envelope(draft), Redactor.none)).toBe(true)
    expect(matches(draft, envelope({ ...draft, type: "tool.finished" }), Redactor.none)).toBe(false)
    expect(matches(draft, envelope({ ...draft, parent: "e4" }), Redactor.none)).toBe(false)
    expect(matches({ ...draft, parent: undefined }, envelope({ ...draft, parent: null }), Redactor.none)).toBe(true)
  })

  it("compares data as JSON: key order counts, undefined members and observations do not", () => {
    const m = (produced: unknown, recorded: unknown) =>
      matches(
        { agent: "main", type: "t", data: produced },
        envelope({ agent: "main", type: "t", data: recorded }),
        Redactor.make()
      )
    expect(m({ a: 1, b: [1, "x"] }, { a: 1, b: [1, "x"] })).toBe(true)
    expect(m({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(false)
    expect(m({ a: 1, b: undefined }, { a: 1 })).toBe(true)
    expect(m({ a: 1, observed: { ms: 3 } }, { a: 1, observed: { ms: 9 } })).toBe(true)
    expect(m({ a: 1, observed: { ms: 3 } }, { a: 2, observed: { ms: 3 } })).toBe(false)
    expect(m({ at: new Date(0) }, { at: "1970-01-01T00:00:00.000Z" })).toBe(true)
    expect(m({ n: 10n }, { n: "10" })).toBe(true)
    expect(m([Number.NaN, undefined], [null, null])).toBe(true)
    expect(m({ a: [1, 2] }, { a: [1, 2, 3] })).toBe(false)
  })

  it("redacts the produced side only: a live secret matches its recorded marker, a recorded secret diverges", () => {
    const redactor = Redactor.make({ secrets: { APP_TOKEN: SECRET } })
    const produced: Event.Draft = { agent: "main", type: "t", data: { out: `token ${SECRET}` } }
    const marker = envelope({ agent: "main", type: "t", data: { out: "token [REDACTED:APP_TOKEN]" } })
    expect(matches(produced, marker, redactor)).toBe(true)
    // the same data on both sides (a replayed outcome) that the redactor would change
    const raw = envelope({ agent: "main", type: "t", data: { out: `token ${SECRET}` } })
    expect(matches({ ...produced, data: raw.data }, raw, redactor)).toBe(false)
    const key = envelope({ agent: "main", type: "t", data: { key: "AKIAABCDEFGHIJKLMNOP" } })
    expect(matches({ agent: "main", type: "t", data: key.data }, key, Redactor.make())).toBe(false)
    expect(matches({ agent: "main", type: "t", data: key.data }, key, Redactor.none)).toBe(true)
  })

  it("fails as before on data that cannot be serialized (a cycle)", () => {
    const data: Record<string, unknown> = { a: 1 }
    data.self = data
    const rec = Recorder.makeReplay({
      events: [envelope({ agent: "main", type: "t", data: { a: 1, self: { a: 1 } } })],
      mode: "replay"
    })
    const exit = Effect.runSyncExit(rec.append({ agent: "main", type: "t", data }))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Die").toBe(true)
    expect(
      referenceMatches(
        { agent: "main", type: "t", data },
        envelope({ agent: "main", type: "t", data: {} }),
        Redactor.none
      )
    ).toBe("dies")
  })
})

describe("Redactor.isClean", () => {
  it("answers true only when redacting the JSON would change nothing", () => {
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: redactors.length - 1 }), (v, r) => {
        const redactor = redactors[r]![1]
        if (Redactor.isClean(redactor, v)) {
          const json = referenceJson(v)
          expect(redactor.redact(json)).toBe(json)
        }
      }),
      { numRuns: 3_000 }
    )
  })

  it("decides plain data without serializing it, and leaves the rest to the JSON text", () => {
    const r = Redactor.make({ secrets: { APP_TOKEN: SECRET } })
    expect(Redactor.isClean(r, { a: ["x", 1, null, true], b: { c: "line\nbreak" } })).toBe(true)
    expect(Redactor.isClean(r, { a: `x${SECRET}` })).toBe(false)
    expect(Redactor.isClean(r, { [SECRET]: 1 })).toBe(false)
    expect(Redactor.isClean(r, ["sk-abcdefghijklmnopqrstuvwxyz012345"])).toBe(false)
    expect(Redactor.isClean(r, { at: new Date(0) })).toBe(false)
    expect(Redactor.isClean(Redactor.none, { a: SECRET })).toBe(true)
    expect(Redactor.isClean({ redact: (json) => json }, { a: 1 })).toBe(false)
    expect(Redactor.isClean(Redactor.make({ secrets: { ODD_SECRET: 'a"b,c:d{e}' } }), { a: 1 })).toBe(false)
    expect(Redactor.isClean(Redactor.make({ secrets: { PIN_SECRET: "12345678" } }), { n: 9123456789 })).toBe(false)
  })
})

describe("Recorder steps and durability", () => {
  /** A log whose commits wait until `open` is called: what is durable, and what waited for it. */
  const gatedLog = Effect.gen(function* () {
    const gate = yield* Deferred.make<void>()
    const base = yield* EventLog.memoryBackend()
    const backend: EventLog.Backend = {
      ...base,
      commit: (batch) => Effect.zipRight(Deferred.await(gate), base.commit(batch))
    }
    const log = yield* EventLog.make(backend, { sessionId: "gated" })
    return { log, open: Deferred.succeed(gate, undefined), stored: () => base.events.map((e) => e.type) }
  })

  const stepOf = (ran: Array<string>, type: string, durableIntent?: boolean) => ({
    agent: "main",
    intent: { type, data: {} },
    ...(durableIntent === undefined ? {} : { durableIntent }),
    run: () => Effect.sync(() => ran.push(type)),
    outcome: () => ({ type: `${type}.done`, data: {} }),
    outcomeTypes: [`${type}.done`],
    fromOutcome: () => 0
  })

  it.scopedLive("a step's effect waits for its intent to be durable; with durableIntent: false it does not", () =>
    Effect.gen(function* () {
      const { log, open, stored } = yield* gatedLog
      const rec = Recorder.makeLive(log)
      const ran: Array<string> = []
      // a read: runs while nothing has reached the store
      yield* Recorder.stepWith(rec, stepOf(ran, "read.started", false)).pipe(Effect.timeout("5 seconds"))
      expect(ran).toEqual(["read.started"])
      expect(stored()).toEqual([])
      // the default: the effect starts only once the intent is durable
      const write = yield* Effect.fork(Recorder.stepWith(rec, stepOf(ran, "write.started")))
      yield* Effect.sleep("50 millis")
      expect(ran).toEqual(["read.started"])
      yield* open
      yield* Fiber.join(write)
      expect(ran).toEqual(["read.started", "write.started"])
      yield* log.flush
      expect(stored()).toEqual(["read.started", "read.started.done", "write.started", "write.started.done"])
    })
  )

  it.scopedLive("observers see an intent appended without waiting once the log has made it durable, in order", () =>
    Effect.gen(function* () {
      const { log, open } = yield* gatedLog
      const seen: Array<string> = []
      const rec = Recorder.makeLive(log, { onEvent: (e) => Effect.sync(() => seen.push(e.type)) })
      yield* rec.append({ agent: "main", parent: null, type: "decided", data: {} }, undefined, { durable: false })
      yield* Recorder.stepWith(rec, stepOf([], "read.started", false)).pipe(Effect.timeout("5 seconds"))
      // observers see only what is durable: nothing yet (not even the outcome the step enqueued)
      yield* Effect.sleep("100 millis")
      expect(seen).toEqual([])
      yield* open
      // the log writes enqueued events on its own, soon: the intent is shown without another append
      const deadline = Date.now() + 5_000
      while (seen.length < 2 && Date.now() < deadline) yield* Effect.sleep("5 millis")
      expect(seen.slice(0, 2)).toEqual(["decided", "read.started"])
    })
  )
})
