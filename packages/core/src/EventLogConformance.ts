/**
 * The behaviour every `EventLog` store must show, as a suite any backend runs against itself: the
 * memory store, the file store of `@musekit/node` and the Postgres store of `@musekit/pg` all pass
 * it, and a third-party backend should too. The cases are plain Effects that fail with a message
 * naming what broke, so they run under any test framework.
 *
 * What is not common to every backend stays in the backend's own tests (torn tails of a file,
 * corrupt rows of a table, SIGKILLed writer processes).
 *
 * @example
 * ```ts
 * import { EventLog } from "@musekit/core"
 * import { EventLogConformance } from "@musekit/core/testing"
 * import { it } from "@effect/vitest"
 * import { Effect } from "effect"
 *
 * const harness: EventLogConformance.Harness = {
 *   name: "memory",
 *   fresh: (options) =>
 *     Effect.sync(() => {
 *       const store = EventLog.makeMemoryStore(options)
 *       return { store, another: Effect.succeed(store) }
 *     })
 * }
 * for (const c of EventLogConformance.cases) it.scoped(c.name, () => c.run(harness))
 * ```
 */
import { Chunk, Effect, Either, Fiber, type Scope, Stream } from "effect"
import * as Checkpoint from "./Checkpoint.js"
import * as Event from "./Event.js"
import * as EventLog from "./EventLog.js"
import * as Redactor from "./Redactor.js"

/** Storage for one case: a store over it, and a way to get another store over the same storage. */
export interface Subject {
  readonly store: EventLog.StoreService
  /**
   * Another store over the same storage, as a second process would have it (backends that cannot
   * be shared between processes, like the memory store, give the same store).
   */
  readonly another: Effect.Effect<EventLog.StoreService, unknown, Scope.Scope>
}

/** How the suite gets at a backend. */
export interface Harness {
  readonly name: string
  /** Fresh, empty storage for one case (removed when the scope closes). */
  readonly fresh: (options?: {
    readonly redactor?: Redactor.Redactor | undefined
  }) => Effect.Effect<Subject, unknown, Scope.Scope>
}

export interface Case {
  readonly name: string
  readonly run: (harness: Harness) => Effect.Effect<void, unknown, Scope.Scope>
}

/** A broken expectation: the case's name and what was expected. */
export class ConformanceFailure extends Error {
  override readonly name = "ConformanceFailure"
}

const check = (ok: boolean, message: () => string): Effect.Effect<void> =>
  ok ? Effect.void : Effect.die(new ConformanceFailure(message()))

const show = (u: unknown) => {
  const s = Event.canonicalJson(u)
  return s.length > 400 ? `${s.slice(0, 400)}…` : s
}

const same = (actual: unknown, expected: unknown, what: string): Effect.Effect<void> =>
  check(
    Event.canonicalJson(actual) === Event.canonicalJson(expected),
    () => `${what}: expected ${show(expected)}, got ${show(actual)}`
  )

/** A short wait on a real timer (a test clock must not stall the suite). */
const pause = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 2)))

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i)

/** Open `session` for the length of `f`. */
const withOpen = <A, E>(
  store: EventLog.StoreService,
  session: string,
  f: (log: EventLog.Service) => Effect.Effect<A, E>,
  create = true
) => Effect.scoped(Effect.flatMap(store.open(session, { create }), f))

const seqs = (events: ReadonlyArray<Event.Envelope>) => events.map((e) => e.seq)

const collect = <A, E>(s: Stream.Stream<A, E>) => Effect.map(Stream.runCollect(s), Chunk.toReadonlyArray)

export const cases: ReadonlyArray<Case> = [
  {
    name: "16 concurrent appenders get a gapless sequence that keeps each appender's order",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        yield* withOpen(store, "s", (log) =>
          Effect.forEach(
            range(16),
            (a) => Effect.forEach(range(40), (i) => log.append({ agent: `a${a}`, type: "t.n", data: { i } })),
            { concurrency: "unbounded" }
          )
        )
        const all = yield* (yield* another).read("s")
        yield* same(seqs(all), range(640), "seqs as stored")
        yield* check(new Set(all.map((e) => e.id)).size === 640, () => "event ids are not unique")
        for (let a = 0; a < 16; a++) {
          yield* same(
            all.filter((e) => e.agent === `a${a}`).map((e) => (e.data as { i: number }).i),
            range(40),
            `order of appender a${a}`
          )
        }
      })
  },
  {
    name: "appendAll gives consecutive seqs and keeps parents",
    run: (h) =>
      Effect.gen(function* () {
        const { store } = yield* h.fresh()
        const got = yield* withOpen(store, "s", (log) =>
          Effect.gen(function* () {
            yield* log.append({ agent: "main", type: "x", data: null })
            const es = yield* log.appendAll([
              { agent: "main", type: "a", data: 1 },
              { agent: "main", type: "b", data: 2, parent: "e0" }
            ])
            return { es: es.map((e) => [e.seq, e.type, e.parent]), last: yield* log.lastSeq }
          })
        )
        yield* same(
          got.es,
          [
            [1, "a", null],
            [2, "b", "e0"]
          ],
          "appendAll"
        )
        yield* same(got.last, 2, "lastSeq")
        yield* same(
          (yield* store.read("s")).map((e) => [e.seq, e.type, e.parent]),
          [
            [0, "x", null],
            [1, "a", null],
            [2, "b", "e0"]
          ],
          "stored"
        )
      })
  },
  {
    name: "stream switches from stored to live events without missing or repeating one",
    run: (h) =>
      Effect.gen(function* () {
        const { store } = yield* h.fresh()
        const got = yield* withOpen(store, "s", (log) =>
          Effect.gen(function* () {
            yield* log.appendAll(range(100).map((i) => ({ agent: "main", type: "n", data: i })))
            const reader = yield* log.stream(50).pipe(Stream.take(150), Stream.runCollect, Effect.fork)
            // appends race the reader's switch from stored to live
            yield* Effect.forEach(range(100, 100), (i) => log.append({ agent: "main", type: "n", data: i }))
            return Chunk.toReadonlyArray(yield* Fiber.join(reader))
          })
        )
        yield* same(seqs(got), range(150, 50), "streamed seqs")
      })
  },
  {
    name: "reopening continues the sequence; events and unknown types come back unchanged",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        const data = {
          nested: { list: [1, "two", null, -0.5, 1e21], flag: true },
          "weird key": "ü ✓ \u0001 \u2028 😀",
          quote: '"\\'
        }
        const written = yield* withOpen(store, "s", (log) =>
          log.appendAll([
            { agent: "main", type: "session.started", data: { title: "t" } },
            { agent: "worker-1", type: "future.kind.v9", data, parent: "e0" }
          ])
        )
        const more = yield* withOpen(store, "s", (log) => log.append({ agent: "main", type: "x", data: {} }), false)
        yield* same(more.seq, 2, "seq after reopening")
        const other = yield* another
        const read = yield* other.read("s")
        yield* same(read.slice(0, 2), written, "events read back")
        yield* same(
          read.map((e) => Event.encodeLine(e)),
          [...written, more].map((e) => Event.encodeLine(e)),
          "canonical lines"
        )
        const reopened = yield* withOpen(other, "s", (log) => EventLog.readAll(log), false)
        yield* same(reopened, read, "events of a log opened by another store")
      })
  },
  {
    name: "secrets are redacted before they are stored",
    run: (h) =>
      Effect.gen(function* () {
        const secret = "sk-test-abcdefghijklmnop"
        const { store, another } = yield* h.fresh({ redactor: Redactor.make({ secrets: { OPENAI_API_KEY: secret } }) })
        const e = yield* withOpen(store, "s", (log) =>
          log.append({
            agent: "main",
            type: "tool.completed",
            data: { output: `export OPENAI_API_KEY=${secret}; ghp_0123456789abcdefghijABCDEFGHIJ012345` }
          })
        )
        for (const [what, got] of [
          ["the appended event", e],
          ["the stored event", (yield* (yield* another).read("s"))[0]]
        ] as const) {
          const text = JSON.stringify(got?.data)
          yield* check(!text.includes(secret) && !text.includes("ghp_0123456789"), () => `${what} holds a secret`)
          yield* check(text.includes("[REDACTED:OPENAI_API_KEY]"), () => `${what} does not name the redaction`)
        }
      })
  },
  {
    name: "blobs are content addressed and shared by the store; a missing or malformed hash is BlobNotFound",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        const big = new Uint8Array(300_000).map((_, i) => (i * 7) % 251)
        const [h1, h2] = yield* withOpen(store, "s", (log) => Effect.all([log.putBlob("hello"), log.putBlob(big)]))
        yield* same(h1, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", "hash of 'hello'")
        yield* same(h2, yield* EventLog.sha256Hex(big), "hash of a large blob")
        const other = yield* another
        yield* same(new TextDecoder().decode(yield* other.getBlob(h1)), "hello", "blob read by another store")
        const back = yield* other.getBlob(h2)
        yield* check(back.length === big.length && back.every((b, i) => b === big[i]), () => "large blob differs")
        // another session of the store sees the same blobs
        const again = yield* withOpen(other, "t", (log) => log.getBlob(h1))
        yield* same(new TextDecoder().decode(again), "hello", "blob seen from another session")
        for (const bad of ["00".repeat(32), "../../etc/passwd", ""]) {
          const err = yield* Effect.flip(store.getBlob(bad))
          yield* same((err as { _tag: string })._tag, "BlobNotFound", `getBlob(${JSON.stringify(bad)})`)
        }
      })
  },
  {
    name: "a missing session is SessionNotFound unless created; exists says which are there",
    run: (h) =>
      Effect.gen(function* () {
        const { store } = yield* h.fresh()
        const err = yield* Effect.flip(withOpen(store, "nope", (log) => log.lastSeq, false))
        yield* same((err as { _tag: string })._tag, "SessionNotFound", "open of a missing session")
        const readErr = yield* Effect.flip(store.read("nope"))
        yield* same((readErr as { _tag: string })._tag, "SessionNotFound", "read of a missing session")
        yield* same(yield* store.exists("nope"), false, "exists before")
        yield* withOpen(store, "nope", (log) => log.lastSeq)
        // a store may make a session with its first events (so a crash before them leaves nothing);
        // one that made it at once holds it empty
        if (yield* store.exists("nope")) {
          yield* same(yield* store.read("nope"), [], "an empty session")
          yield* same(yield* store.ends("nope"), {}, "ends of an empty session")
        }
        yield* withOpen(store, "nope", (log) => log.append({ agent: "main", type: "t", data: {} }))
        yield* same(yield* store.exists("nope"), true, "exists after its first event")
      })
  },
  {
    name: "one writer at a time: a second open fails with SessionLocked, also from another store",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        const other = yield* another
        yield* withOpen(store, "s", (log) =>
          Effect.gen(function* () {
            yield* log.append({ agent: "main", type: "a", data: 0 })
            for (const s of [store, other]) {
              const err = yield* Effect.flip(withOpen(s, "s", (l) => l.lastSeq, false))
              yield* same((err as { _tag: string })._tag, "SessionLocked", "second open")
              yield* check(
                (err as Error).message.includes("session s is open for writing"),
                () => `SessionLocked message: ${(err as Error).message}`
              )
            }
            // the writer goes on undisturbed
            yield* log.append({ agent: "main", type: "b", data: 1 })
          })
        )
        // once closed, the other store takes it and continues the sequence
        const next = yield* withOpen(other, "s", (log) => log.append({ agent: "main", type: "c", data: 2 }), false)
        yield* same(next.seq, 2, "seq of the next writer")
      })
  },
  {
    name: "writers from several stores take turns; the log stays gapless and keeps every acknowledged event",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        yield* withOpen(store, "s", (log) => log.append({ agent: "setup", type: "t", data: {} }))
        const writers = [store, yield* another, yield* another, yield* another]
        const acked: Array<Event.Envelope> = []
        // each writer opens the session when it is free, appends a few events, and closes it
        const turn = (w: number, round: number): Effect.Effect<void, unknown> =>
          withOpen(
            writers[w]!,
            "s",
            (log) =>
              Effect.forEach(range(5), (k) =>
                Effect.map(log.append({ agent: `w${w}`, type: "t", data: { round, k } }), (e) => {
                  acked.push(e)
                })
              ),
            false
          ).pipe(
            Effect.catchIf(
              (e) => (e as { _tag?: string })._tag === "SessionLocked",
              () => Effect.zipRight(pause, turn(w, round))
            )
          )
        yield* Effect.forEach(range(4), (w) => Effect.forEach(range(5), (round) => turn(w, round)), {
          concurrency: "unbounded"
        })
        const all = yield* store.read("s")
        yield* same(seqs(all), range(101), "seqs")
        for (const e of acked) yield* same(all[e.seq], e, `acknowledged event ${e.seq}`)
        for (let w = 0; w < 4; w++) {
          yield* same(
            all.filter((e) => e.agent === `w${w}`).map((e) => e.data),
            range(5).flatMap((round) => range(5).map((k) => ({ round, k }))),
            `order of writer w${w}`
          )
        }
      })
  },
  {
    name: "sessions lists id, title, start, last event and count",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        const a = yield* withOpen(store, "a", (log) =>
          log.appendAll([
            { agent: "main", type: "session.started", data: { title: "fix the build" } },
            { agent: "main", type: "user.message", data: { text: "hi" } }
          ])
        )
        const list = yield* (yield* another).sessions
        yield* same(
          list.map((s) => [s.id, s.title, s.started, s.lastEventAt, s.events]),
          [["a", "fix the build", a[0]!.at, a[1]!.at, 2]],
          "sessions"
        )
        yield* check(list[0]!.bytes > 0, () => `bytes of a non-empty session: ${list[0]!.bytes}`)
      })
  },
  {
    name: "read from a seq returns the events from it on; ends gives the first and the last",
    run: (h) =>
      Effect.gen(function* () {
        const { store } = yield* h.fresh()
        const written = yield* withOpen(store, "s", (log) =>
          log.appendAll(range(50).map((i) => ({ agent: "main", type: "n", data: { i } })))
        )
        yield* same(seqs(yield* store.read("s", 45)), [45, 46, 47, 48, 49], "read from 45")
        yield* same(yield* store.read("s", 50), [], "read past the end")
        const ends = yield* store.ends("s")
        yield* same([ends.first, ends.last], [written[0], written[49]], "ends")
      })
  },
  {
    name: "an append whose data cannot be encoded fails alone and leaves no gap",
    run: (h) =>
      Effect.gen(function* () {
        const { store } = yield* h.fresh()
        const cyclic: Record<string, unknown> = {}
        cyclic.self = cyclic
        yield* withOpen(store, "s", (log) =>
          Effect.gen(function* () {
            yield* log.append({ agent: "main", type: "ok", data: 0 })
            const refused = yield* Effect.exit(log.append({ agent: "main", type: "cyclic", data: cyclic }))
            yield* check(refused._tag === "Failure", () => "a cyclic value was appended")
            const refusedFn = yield* Effect.exit(log.append({ agent: "main", type: "fn", data: () => 1 }))
            yield* check(refusedFn._tag === "Failure", () => "a function was appended")
            yield* same((yield* log.append({ agent: "main", type: "ok", data: 1 })).seq, 1, "seq after refusals")
          })
        )
        yield* same(
          (yield* store.read("s")).map((e) => [e.seq, e.type]),
          [
            [0, "ok"],
            [1, "ok"]
          ],
          "stored"
        )
      })
  },
  {
    name: "an enqueued event is committed in order with the next append, or by flush",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        const other = yield* another
        yield* withOpen(store, "s", (log) =>
          Effect.gen(function* () {
            const a = yield* log.enqueue({ agent: "main", type: "outcome", data: 0 })
            const b = yield* log.append({ agent: "main", type: "intent", data: 1 })
            yield* same([a.seq, b.seq], [0, 1], "seqs")
            yield* same(seqs(yield* other.read("s")), [0, 1], "stored after the append")
            yield* log.enqueue({ agent: "main", type: "outcome", data: 2 })
            yield* log.flush
            yield* same(yield* log.settled, true, "settled after flush")
            yield* same(seqs(yield* other.read("s")), [0, 1, 2], "stored after flush")
          })
        )
      })
  },
  {
    name: "an event larger than 1 MiB is read back whole",
    run: (h) =>
      Effect.gen(function* () {
        const { store, another } = yield* h.fresh()
        const big = "ä✓".repeat(700_000)
        const written = yield* withOpen(store, "s", (log) =>
          log.appendAll([
            { agent: "main", type: "small", data: 1 },
            { agent: "main", type: "big", data: { big } },
            { agent: "main", type: "small", data: 2 }
          ])
        )
        const other = yield* another
        yield* same(yield* other.read("s"), written, "read back")
        yield* same(yield* withOpen(other, "s", (log) => collect(log.read(1)), false), written.slice(1), "log.read")
      })
  },
  {
    name: "checkpoints: none at first, then the latest one, redacted like the log",
    run: (h) =>
      Effect.gen(function* () {
        const secret = "sk-test-abcdefghijklmnop"
        const { store, another } = yield* h.fresh({ redactor: Redactor.make({ secrets: { OPENAI_API_KEY: secret } }) })
        const none = yield* store.readCheckpoint("s")
        yield* same(Either.isLeft(none) ? none.left : "a checkpoint", "none", "before any")
        const events = yield* withOpen(store, "s", (log) =>
          log.appendAll(range(3).map((i) => ({ agent: "main", type: "n", data: { i } })))
        )
        yield* store.writeCheckpoint(Checkpoint.make({ session: "s", at: events[1]!, state: { n: 1 } }))
        yield* store.writeCheckpoint(Checkpoint.make({ session: "s", at: events[2]!, state: { n: 2, key: secret } }))
        const read = yield* (yield* another).readCheckpoint("s")
        yield* check(Either.isRight(read), () => `checkpoint not read back: ${Either.isLeft(read) ? read.left : ""}`)
        const cp = (read as Either.Right<string, Checkpoint.Checkpoint>).right
        yield* same([cp.session, cp.seq, cp.check], ["s", 2, Checkpoint.checkOf(events[2]!)], "checkpoint")
        yield* same(cp.state, { n: 2, key: "[REDACTED:OPENAI_API_KEY]" }, "checkpoint state")
        const other = yield* store.readCheckpoint("t")
        yield* same(Either.isLeft(other) ? other.left : "a checkpoint", "none", "another session's checkpoint")
      })
  }
]
