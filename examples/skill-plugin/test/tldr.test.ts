import { describe, expect, it } from "@effect/vitest"
import { Agent, type Event, EventLog, Model, Plugin, Session, Skill, Tools } from "@musekit/core"
import { layerAgentServices, Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect, type Layer, Schema } from "effect"
import { TldrPlugin } from "../src/index.js"

/** A read-only file tool over a map, standing in for a real workspace. */
const readFile = (files: Record<string, string>, reads: Array<string>) =>
  Tools.make({
    name: "read_file",
    description: "Read a file",
    parameters: { path: Schema.String },
    effect: "read",
    handler: ({ path }) =>
      Effect.suspend(() => {
        reads.push(path)
        const content = files[path]
        return content === undefined
          ? Effect.fail(new Tools.ToolError({ message: `${path} does not exist` }))
          : Effect.succeed({ content })
      })
  })

const files = { "ARCHITECTURE.md": "# Architecture\nAn event log, an agent loop and plugins.\n" }

/** The program a host runs: an agent, the plugin's skills in a registry, one invocation. */
const program = (input: string, languageModel: Layer.Layer<any>, output: Array<string>, reads: Array<string>) =>
  Effect.gen(function* () {
    const plugins = yield* Plugin.Plugins
    const agent = yield* Agent.make({ name: "main", instructions: "You help with this repository." })
    return yield* Skill.makeRegistry(plugins.skills)
      .invoke(input)
      .pipe(
        Effect.provideService(Skill.SkillContext, {
          agent,
          output: (text) => Effect.sync(() => void output.push(text))
        })
      )
  }).pipe(
    Effect.provide(layerAgentServices({ languageModel, tools: [readFile(files, reads)], plugins: [TldrPlugin.make()] }))
  )

const recordLive = <A, E>(p: Effect.Effect<A, E, any>) =>
  Effect.gen(function* () {
    const result = yield* Session.run(p)
    return { result, events: yield* EventLog.readAll(yield* EventLog.EventLog) }
  }).pipe(Effect.provide(EventLog.layerMemory("tldr"))) as Effect.Effect<
    { result: A; events: ReadonlyArray<Event.Envelope> },
    E
  >

describe("/tldr", () => {
  it.effect("summarizes a file, shows it, records it, and replays exactly", () =>
    Effect.gen(function* () {
      const model = scriptedModel([
        Scripted.toolCalls([{ name: "read_file", params: { path: "ARCHITECTURE.md" } }]),
        Scripted.text("- An event log records everything\n- One agent loop\n- Plugins extend it")
      ])
      const output: Array<string> = []
      const reads: Array<string> = []
      const { result, events } = yield* recordLive(
        program("/tldr ARCHITECTURE.md --bullets 3", model.layer, output, reads)
      )
      expect(result).toEqual({
        path: "ARCHITECTURE.md",
        points: ["An event log records everything", "One agent loop", "Plugins extend it"]
      })
      expect(reads).toEqual(["ARCHITECTURE.md"])
      expect(output).toEqual([
        "TL;DR of ARCHITECTURE.md:\n- An event log records everything\n- One agent loop\n- Plugins extend it"
      ])
      expect(JSON.stringify(model.prompts[0]!.content)).toContain("summarize it in exactly 3 bullet points")
      const summarized = events.find((e) => e.type === "tldr.summarized")!
      expect(summarized.agent).toBe("main")
      expect(summarized.data).toEqual(result)

      const replayReads: Array<string> = []
      const report = yield* Session.replay(
        program("/tldr ARCHITECTURE.md --bullets 3", Model.layerLanguageModelForbidden, [], replayReads),
        { events, verify: true }
      )
      expect(report.matched).toBe(events.length)
      expect(replayReads).toEqual([])
    })
  )

  it.effect("bad arguments are a clear error", () =>
    Effect.gen(function* () {
      const run = (input: string) => Effect.flip(recordLive(program(input, scriptedModel([]).layer, [], [])))
      expect((yield* run("/tldr")).message).toContain("give a file. Usage: /tldr <path> [--bullets N]")
      expect((yield* run("/tldr README.md --bullets 40")).message).toContain(
        "--bullets must be a whole number from 1 to 10"
      )
    })
  )
})
