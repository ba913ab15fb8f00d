import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Stream } from "effect"
import { Event, EventLog, Redactor } from "../src/index.js"

describe("EventLog (memory)", () => {
  it.scoped("16 concurrent appenders get a gapless, ordered sequence", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      yield* Effect.forEach(
        Array.from({ length: 16 }, (_, i) => i),
        (i) =>
          Effect.forEach(
            Array.from({ length: 50 }, (_, j) => j),
            (j) => log.append({ agent: `a${i}`, type: "test.tick", data: { j } })
          ),
        { concurrency: "unbounded" }
      )
      const all = yield* EventLog.readAll(log)
      expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 800 }, (_, i) => i))
      expect(new Set(all.map((e) => e.id)).size).toBe(800)
      for (let i = 0; i < 16; i++) {
        expect(all.filter((e) => e.agent === `a${i}`).map((e) => (e.data as any).j)).toEqual(
          Array.from({ length: 50 }, (_, j) => j)
        )
      }
    }).pipe(Effect.provide(EventLog.layerMemory("t")))
  )

  it.scoped("appendAll gives consecutive seqs", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      yield* log.append({ agent: "main", type: "x", data: null })
      const es = yield* log.appendAll([
        { agent: "main", type: "a", data: 1 },
        { agent: "main", type: "b", data: 2, parent: "e0" }
      ])
      expect(es.map((e) => [e.seq, e.type, e.parent])).toEqual([
        [1, "a", null],
        [2, "b", "e0"]
      ])
      expect(yield* log.lastSeq).toBe(2)
    }).pipe(Effect.provide(EventLog.layerMemory("t")))
  )

  it.scoped("stream switches from stored to live without missing or repeating", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      for (let i = 0; i < 100; i++) yield* log.append({ agent: "main", type: "n", data: i })
      const reader = yield* log.stream(50).pipe(Stream.take(150), Stream.runCollect, Effect.fork)
      // appends race the reader's switch from stored to live
      yield* Effect.forEach(
        Array.from({ length: 100 }, (_, i) => 100 + i),
        (i) => log.append({ agent: "main", type: "n", data: i })
      )
      const got = Chunk.toReadonlyArray(yield* Fiber.join(reader))
      expect(got.map((e) => e.seq)).toEqual(Array.from({ length: 150 }, (_, i) => 50 + i))
    }).pipe(Effect.provide(EventLog.layerMemory("t")))
  )

  it.scoped("unknown event types and future data are passed through unchanged", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      const data = { nested: { list: [1, "two", null], flag: true }, "weird key": "ü ✓" }
      yield* log.append({ agent: "main", type: "future.kind.v9", data })
      const [e] = yield* EventLog.readAll(log)
      expect(e!.type).toBe("future.kind.v9")
      expect(e!.data).toEqual(data)
      const line = Event.encodeLine(e!)
      expect(Event.fromJson(JSON.parse(line))).toEqual(e)
    }).pipe(Effect.provide(EventLog.layerMemory("t")))
  )

  it.scoped("secrets are redacted before they are stored", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      yield* log.append({
        agent: "main",
        type: "tool.completed",
        data: { output: "export OPENAI_API_KEY=sk-test-abcdefghijklmnop; ghp_0123456789abcdefghijABCDEFGHIJ012345" }
      })
      const [e] = yield* EventLog.readAll(log)
      const text = JSON.stringify(e!.data)
      expect(text).not.toContain("sk-test-abcdefghijklmnop")
      expect(text).not.toContain("ghp_0123456789")
      expect(text).toContain("[REDACTED:OPENAI_API_KEY]")
    }).pipe(
      Effect.provide(
        EventLog.layerMemory("t", {
          redactor: Redactor.make({ secrets: { OPENAI_API_KEY: "sk-test-abcdefghijklmnop" } })
        })
      )
    )
  )

  it.scoped("blobs are redacted like events; an exact blob holding a secret goes to the backend's sealed store", () =>
    Effect.gen(function* () {
      const stored = new Map<string, Uint8Array>()
      const sealed = new Map<string, Uint8Array>()
      const backend = yield* EventLog.memoryBackend([], stored)
      const log = yield* EventLog.make(
        {
          ...backend,
          putSealed: (data) =>
            Effect.map(EventLog.sha256Hex(data), (h) => {
              sealed.set(h, data)
              return h
            })
        },
        { sessionId: "t", redactor: Redactor.make({ secrets: { OPENAI_API_KEY: "sk-test-abcdefghijklmnop" } }) }
      )
      const text = (b: Uint8Array) => new TextDecoder().decode(b)
      // a large output: stored redacted, bytes around the secret untouched (UTF-8 and binary alike)
      const output = new Uint8Array([0xff, 0x00, ...new TextEncoder().encode("ä key=sk-test-abcdefghijklmnop ✓"), 0x80])
      const h1 = yield* log.putBlob(output)
      const got = yield* log.getBlob(h1)
      expect(got[0]).toBe(0xff)
      expect(got[got.length - 1]).toBe(0x80)
      expect(text(got.subarray(2, -1))).toBe("ä key=[REDACTED:OPENAI_API_KEY] ✓")
      expect(sealed.size).toBe(0)
      // a file before an edit: kept exactly, but not in the plain store
      const file = "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
      const h2 = yield* log.putBlob(file, { exact: true })
      expect(h2).toBe(yield* EventLog.sha256Hex(new TextEncoder().encode(file)))
      expect(stored.has(h2)).toBe(false)
      expect(text(sealed.get(h2)!)).toBe(file)
      // without a secret, an exact blob is an ordinary one
      const h3 = yield* log.putBlob("plain", { exact: true })
      expect(text(stored.get(h3)!)).toBe("plain")
      for (const b of stored.values()) {
        expect(text(b)).not.toContain("sk-test-abcdefghijklmnop")
        expect(text(b)).not.toContain("ghp_")
      }
    })
  )

  it.scoped("blobs are content addressed", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      const h = yield* log.putBlob("hello")
      expect(h).toBe("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
      expect(new TextDecoder().decode(yield* log.getBlob(h))).toBe("hello")
      const missing = yield* Effect.flip(log.getBlob("00".repeat(32)))
      expect(missing._tag).toBe("BlobNotFound")
    }).pipe(Effect.provide(EventLog.layerMemory("t")))
  )
})

describe("EventLog commits", () => {
  /** A memory log that counts its backend's commits. */
  const counted = Effect.gen(function* () {
    const base = yield* EventLog.memoryBackend()
    const commits: Array<ReadonlyArray<string>> = []
    const backend: EventLog.Backend = {
      ...base,
      commit: (batch) =>
        Effect.zipRight(
          Effect.sync(() => commits.push(batch.map((c) => c.event.type))),
          base.commit(batch)
        )
    }
    const log = yield* EventLog.make(backend, { sessionId: "counted" })
    return { log, commits }
  })

  it.scopedLive("enqueued events share the next durable append's commit (one sync per turn, not one per event)", () =>
    Effect.gen(function* () {
      const { log, commits } = yield* counted
      yield* log.enqueue({ agent: "main", type: "model.responded", data: {} })
      yield* log.enqueue({ agent: "main", type: "tool.started", data: {} })
      // an agent's tool runs here: nothing forces a write
      yield* Effect.sleep("5 millis")
      yield* log.enqueue({ agent: "main", type: "tool.completed", data: {} })
      yield* log.append({ agent: "main", type: "model.requested", data: {} })
      expect(commits).toEqual([["model.responded", "tool.started", "tool.completed", "model.requested"]])
      expect(yield* log.commits).toBe(1)
    })
  )

  it.scopedLive("an enqueued event with no append after it is written on its own, soon", () =>
    Effect.gen(function* () {
      const { log, commits } = yield* counted
      yield* log.enqueue({ agent: "main", type: "turn.note", data: {} })
      const deadline = Date.now() + 5_000
      while (commits.length === 0 && Date.now() < deadline) yield* Effect.sleep("10 millis")
      expect(commits).toEqual([["turn.note"]])
      expect(yield* log.settled).toBe(true)
    })
  )
})
