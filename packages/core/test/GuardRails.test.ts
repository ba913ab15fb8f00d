import { Tool as AiTool, Toolkit } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Agent, EventLog, Model, Recorder, Session, Tools } from "../src/index.js"
import { layerAgentServices, Scripted, scriptedModel, type Turn } from "../src/testing.js"

const lookup = Tools.make({
  name: "lookup",
  description: "Look a word up",
  parameters: { word: Schema.String },
  effect: "read",
  handler: ({ word }) => Effect.succeed({ meaning: `${word} means hello` })
})
const shout = Tools.make({
  name: "shout",
  description: "Shout a word (a plugin's tool)",
  parameters: { word: Schema.String },
  effect: "read",
  handler: ({ word }) => Effect.succeed({ loud: word.toUpperCase() })
})

const reply: Turn = (prompt) =>
  prompt.content.some((m) => m.role === "tool")
    ? Scripted.text("hallo means hello")
    : Scripted.toolCalls([{ id: "c1", name: "lookup", params: { word: "hallo" } }])

const program = (tools: ReadonlyArray<Tools.Definition>, languageModel = scriptedModel([reply]).layer) =>
  Effect.gen(function* () {
    const agent = yield* Agent.make({ name: "main", instructions: "You translate." })
    return yield* agent.send("what does hallo mean?")
  }).pipe(Effect.provide(layerAgentServices({ languageModel, tools })))

describe("guard rails", () => {
  it.effect("Session.run refuses a log that already holds events and names resume", () =>
    Effect.gen(function* () {
      yield* Session.run(program([lookup]))
      const log = yield* EventLog.EventLog
      const before = yield* log.lastSeq
      const err = yield* Effect.flip(Session.run(program([lookup])))
      expect(err).toBeInstanceOf(Session.SessionNotEmpty)
      expect(err.message).toContain("Session.resume")
      expect(err.message).toContain(`${before + 1} event(s)`)
      // nothing was appended
      expect(yield* log.lastSeq).toBe(before)
    }).pipe(Effect.provide(EventLog.layerMemory("guard")))
  )

  it.effect("a replay without a tool the recording had names that tool", () =>
    Effect.gen(function* () {
      const events = yield* Effect.gen(function* () {
        yield* Session.run(program([lookup, shout]))
        return yield* EventLog.readAll(yield* EventLog.EventLog)
      }).pipe(Effect.provide(EventLog.layerMemory("rec")))
      const err = yield* Effect.flip(
        Session.replay(program([lookup], Model.layerLanguageModelForbidden), { events, verify: true })
      )
      expect(err._tag).toBe("Divergence")
      const d = err as Recorder.Divergence
      expect(d.hint).toContain("the tool(s) shout that this run lacks")
      expect(d.message).toContain("replay with the same plugins and tools")
      // and with every tool it replays exactly
      const ok = yield* Session.replay(program([lookup, shout], Model.layerLanguageModelForbidden), {
        events,
        verify: true
      })
      expect(ok.matched).toBe(events.length)
    })
  )

  it("a plugin's event in the recording is named when the run lacks the plugin", () => {
    expect(
      Recorder.divergenceHint({ type: "compaction.compacted", data: {} }, { type: "model.requested", data: {} })
    ).toContain("replay with the plugin that records compaction.* events")
    expect(Recorder.divergenceHint({ type: "model.requested", data: {} }, { type: "model.requested", data: {} })).toBe(
      undefined
    )
  })
})

describe("Tools.fromToolkit", () => {
  it.effect("an @effect/ai toolkit's tools run through its own handlers inside the agent loop, and replay", () =>
    Effect.gen(function* () {
      const Lookup = AiTool.make("lookup", {
        description: "Look a word up",
        parameters: { word: Schema.String },
        success: Schema.Struct({ meaning: Schema.String })
      })
      const Dict = Toolkit.make(Lookup)
      const seen: Array<string> = []
      const handlers = Dict.toLayer({
        lookup: ({ word }) =>
          Effect.sync(() => {
            seen.push(word)
            return { meaning: `${word} means hello` }
          })
      })
      const tools = yield* Tools.fromToolkit(Dict, { effect: "read" }).pipe(Effect.provide(handlers))
      expect(tools.map((t) => [t.name, t.effect, t.description])).toEqual([["lookup", "read", "Look a word up"]])
      const events = yield* Effect.gen(function* () {
        const result = yield* Session.run(program(tools))
        expect(result.text).toBe("hallo means hello")
        return yield* EventLog.readAll(yield* EventLog.EventLog)
      }).pipe(Effect.provide(EventLog.layerMemory("kit")))
      expect(seen).toEqual(["hallo"])
      const done = events.find((e) => e.type === "tool.completed")!
      expect(JSON.stringify(done.data)).toContain("hallo means hello")
      const report = yield* Session.replay(program(tools, Model.layerLanguageModelForbidden), { events, verify: true })
      expect(report.matched).toBe(events.length)
      expect(seen).toEqual(["hallo"])
    })
  )
})
