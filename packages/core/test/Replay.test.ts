import { Prompt } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Layer, Schema } from "effect"
import { Agent, type Approvals, Event, EventLog, Model, Session, Tools } from "../src/index.js"
import { autoPrompter, layerAgentServices, Scripted, scriptedModel, type Turn } from "../src/testing.js"

/** A model whose reply depends only on the prompt (so a resumed run gets the same answers). */
const byProgress: Turn = (prompt) => {
  const results = prompt.content.filter((m) => m.role === "tool").length
  if (results < 6) {
    return Scripted.toolCalls([
      { id: `r${results}`, name: "counter", params: { step: results } },
      ...(results % 2 === 0 ? [{ id: `w${results}`, name: "append", params: { line: `line ${results}` } }] : [])
    ])
  }
  return Scripted.text(`finished after ${results} tool turns`)
}

const makeTools = (lines: Array<string>, called: Array<string>) => [
  Tools.make({
    name: "counter",
    description: "Count",
    parameters: { step: Schema.Number },
    effect: "read",
    handler: ({ step }) =>
      Effect.sync(() => {
        called.push(`counter ${step}`)
        return { value: step * 10 }
      })
  }),
  Tools.make({
    name: "append",
    description: "Append a line",
    parameters: { line: Schema.String },
    effect: "write",
    handler: ({ line }) =>
      Effect.sync(() => {
        called.push(`append ${line}`)
        lines.push(line)
        return { lines: lines.length }
      })
  })
]

const program = (options: {
  lines?: Array<string>
  called?: Array<string>
  languageModel?: Layer.Layer<any>
  task?: string
  instructions?: string
  approvals?: Approvals.Policy
  prompter?: Layer.Layer<Approvals.Prompter>
}) =>
  Effect.gen(function* () {
    const agent = yield* Agent.make({ name: "main", instructions: options.instructions ?? "You count." })
    const first = yield* agent.send(options.task ?? "count to six")
    const second = yield* agent.send("now say goodbye")
    return [first, second]
  }).pipe(
    Effect.provide(
      layerAgentServices({
        languageModel: options.languageModel ?? scriptedModel([byProgress]).layer,
        tools: makeTools(options.lines ?? [], options.called ?? []),
        approvals: options.approvals,
        prompter: options.prompter
      })
    )
  )

const record = (p: Effect.Effect<any, any, any>) =>
  Effect.gen(function* () {
    yield* Session.run(p)
    return yield* EventLog.readAll(yield* EventLog.EventLog)
  }).pipe(Effect.provide(EventLog.layerMemory("rec"))) as Effect.Effect<ReadonlyArray<Event.Envelope>>

/** What an uninterrupted run had done to the world (the appended lines) before event `cut`. */
const worldAt = (events: ReadonlyArray<Event.Envelope>, cut: number) =>
  events
    .slice(0, cut)
    .filter((e) => e.type === "tool.completed" && (e.data as any).tool === "append")
    .map((_, i) => `line ${i * 2}`)

const stripAt = (events: ReadonlyArray<Event.Envelope>) => events.map((e) => Event.encodeLine({ ...e, at: 0 }))

describe("Replay", () => {
  it.effect("replays a recorded multi-turn, multi-tool session byte for byte without model or tools", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const events = yield* record(program({ lines }))
      expect(events.length).toBeGreaterThan(40)
      expect(lines).toEqual(["line 0", "line 2", "line 4"])

      const called: Array<string> = []
      const replayed: Array<string> = []
      const report = yield* Session.replay(program({ called, languageModel: Model.layerLanguageModelForbidden }), {
        events,
        verify: true,
        onEvent: (e) => Effect.sync(() => void replayed.push(Event.encodeLine(e)))
      })
      expect(report).toEqual({ matched: events.length, total: events.length, endedEarly: false })
      expect(called).toEqual([])
      expect(replayed).toEqual(events.map((e) => Event.encodeLine(e)))
    })
  )

  it.effect("verify names the first divergent seq for a changed prompt", () =>
    Effect.gen(function* () {
      const events = yield* record(program({}))
      const err = yield* Effect.flip(
        Session.replay(program({ languageModel: Model.layerLanguageModelForbidden, task: "count to seven" }), {
          events,
          verify: true
        })
      )
      expect(err._tag).toBe("Divergence")
      expect((err as any).seq).toBe(0)
      expect(err.message).toContain("replay diverged at seq 0 (agent main)")
      expect(err.message).toContain("count to six")
      expect(err.message).toContain("count to seven")

      const sys = yield* Effect.flip(
        Session.replay(
          program({ languageModel: Model.layerLanguageModelForbidden, instructions: "You count slowly." }),
          { events, verify: true }
        )
      )
      const firstRequest = events.find((e) => e.type === "model.requested")!
      expect((sys as any).seq).toBe(firstRequest.seq)
    })
  )

  it.effect("verify catches a changed tool result at the next request that carries it", () =>
    Effect.gen(function* () {
      const events = [...(yield* record(program({})))]
      const i = events.findIndex((e) => e.type === "tool.completed")
      events[i] = { ...events[i]!, data: { ...(events[i]!.data as any), result: { value: 999 } } }
      const err = yield* Effect.flip(
        Session.replay(program({ languageModel: Model.layerLanguageModelForbidden }), { events, verify: true })
      )
      const nextRequest = events.slice(i).find((e) => e.type === "model.requested")!
      expect(err._tag).toBe("Divergence")
      expect((err as any).seq).toBe(nextRequest.seq)
      expect(err.message).toContain("999")
    })
  )

  it.effect("verify catches a reordered event", () =>
    Effect.gen(function* () {
      const events = [...(yield* record(program({})))]
      const i = events.findIndex((e) => e.type === "approval.decided")
      const a = events[i]!
      const b = events[i + 1]!
      events[i] = { ...b, seq: a.seq, id: a.id }
      events[i + 1] = { ...a, seq: b.seq, id: b.id }
      const err = yield* Effect.flip(
        Session.replay(program({ languageModel: Model.layerLanguageModelForbidden }), { events, verify: true })
      )
      expect(err._tag).toBe("Divergence")
      expect((err as any).seq).toBe(a.seq)
    })
  )

  it.effect("verify reports events the program did not produce", () =>
    Effect.gen(function* () {
      const events = yield* record(program({}))
      const extra: Event.Envelope = {
        ...events[events.length - 1]!,
        seq: events.length,
        id: Event.idFor(events.length),
        type: "note.extra"
      }
      const err = yield* Effect.flip(
        Session.replay(program({ languageModel: Model.layerLanguageModelForbidden }), {
          events: [...events, extra],
          verify: true
        })
      )
      expect(err._tag).toBe("Unreplayed")
      expect(err.message).toContain(`seq ${events.length}`)
    })
  )

  it.effect("resume after a cut at every point finishes with the same events as an uninterrupted run", () =>
    Effect.gen(function* () {
      const reference = yield* record(program({}))
      const referenceLines: Array<string> = []
      yield* record(program({ lines: referenceLines }))
      for (let cut = 1; cut < reference.length; cut++) {
        const last = reference[cut - 1]!
        // a write in flight at the cut is settled as "interrupted" (next test), not re-run
        if (last.type === "tool.started" && (last.data as any).tool === "append") continue
        const lines = worldAt(reference, cut)
        const called: Array<string> = []
        const log = EventLog.layerMemory("cut", { initial: reference.slice(0, cut) })
        const final = yield* Effect.gen(function* () {
          yield* Session.resume(program({ lines, called }))
          return yield* EventLog.readAll(yield* EventLog.EventLog)
        }).pipe(Effect.provide(log))
        expect(stripAt(final)).toEqual(stripAt(reference))
        expect(lines).toEqual(referenceLines)
      }
    })
  )

  it.effect("an in-flight write at the tail is reported to the model as interrupted, a read is re-run", () =>
    Effect.gen(function* () {
      const reference = yield* record(program({}))
      const writeStart = reference.find((e) => e.type === "tool.started" && (e.data as any).tool === "append")!
      const readStart = reference.find((e) => e.type === "tool.started" && (e.data as any).tool === "counter")!
      for (const [start, expectInterrupted] of [
        [writeStart, true],
        [readStart, false]
      ] as const) {
        const called: Array<string> = []
        const sm = scriptedModel([byProgress])
        const log = EventLog.layerMemory("cut", { initial: reference.slice(0, start.seq + 1) })
        const final = yield* Effect.gen(function* () {
          yield* Session.resume(program({ called, languageModel: sm.layer }))
          return yield* EventLog.readAll(yield* EventLog.EventLog)
        }).pipe(Effect.provide(log))
        const outcome = final[start.seq + 1]!
        expect(outcome.type).toBe("tool.completed")
        expect(outcome.parent).toBe(start.id)
        if (expectInterrupted) {
          expect((outcome.data as any).isFailure).toBe(true)
          expect((outcome.data as any).result.error).toContain(
            "interrupted: the session stopped while append was running"
          )
          expect(called.filter((c) => c.startsWith("append line 0"))).toEqual([])
        } else {
          expect((outcome.data as any).isFailure).toBe(false)
          expect(called[0]).toBe("counter 0")
        }
      }
    })
  )

  it.effect("a pending approval at the tail is asked again after resume", () =>
    Effect.gen(function* () {
      const reference = yield* record(program({ approvals: { mode: "ask" } }))
      const asked = reference.find((e) => e.type === "approval.requested")!
      const prompter = autoPrompter({ allow: true, scope: "once" })
      const log = EventLog.layerMemory("cut", { initial: reference.slice(0, asked.seq + 1) })
      const final = yield* Effect.gen(function* () {
        yield* Session.resume(program({ approvals: { mode: "ask" }, prompter: prompter.layer }))
        return yield* EventLog.readAll(yield* EventLog.EventLog)
      }).pipe(Effect.provide(log))
      expect(prompter.asked.length).toBeGreaterThan(0)
      expect(prompter.asked[0]!.tool).toBe("append")
      expect(final[asked.seq + 1]!.type).toBe("approval.answered")
      expect(stripAt(final)).toEqual(stripAt(reference))
    })
  )

  it.effect("resuming twice gives the same result", () =>
    Effect.gen(function* () {
      const reference = yield* record(program({}))
      let cut = Math.floor(reference.length / 2)
      while (reference[cut - 1]!.type === "tool.started") cut++
      const mem = EventLog.makeMemoryStore()
      yield* Effect.scoped(
        Effect.gen(function* () {
          const log = yield* mem.open("s", { create: true })
          yield* log.appendAll(reference.slice(0, cut).map(Event.toDraft))
        })
      )
      const lines = worldAt(reference, cut)
      const resumeOnce = Effect.scoped(
        Effect.gen(function* () {
          const log = yield* mem.open("s")
          yield* Session.resume(program({ lines })).pipe(Effect.provideService(EventLog.EventLog, log))
          return yield* EventLog.readAll(log)
        })
      )
      const first = yield* resumeOnce
      const second = yield* resumeOnce
      expect(stripAt(second)).toEqual(stripAt(first))
      expect(stripAt(first)).toEqual(stripAt(reference))
    })
  )

  it.effect("a prompt with history survives the recorded delta encoding", () =>
    Effect.gen(function* () {
      const events = yield* record(program({}))
      const requests = events.filter((e) => e.type === "model.requested").map((e) => e.data as any)
      // rebuild each full prompt from keep + appended, and check its hash
      let messages: Array<unknown> = []
      for (const r of requests) {
        messages = [...messages.slice(0, r.keep), ...r.appended]
        expect(messages.length).toBe(r.messages)
        expect(Model.promptHash(messages.map((m) => Event.canonicalJson(m)))).toBe(r.hash)
        expect(() => Prompt.make(messages as any)).not.toThrow()
      }
    })
  )
})
