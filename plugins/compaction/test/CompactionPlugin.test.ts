import * as fs from "node:fs"
import type { Prompt } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Agent, Model, Plugin, Session } from "@musekit/core"
import { layerAgentServices } from "@musekit/core/testing"
import { Effect } from "effect"
import { CompactionPlugin, Tokens } from "../src/index.js"
import {
  FACTS,
  failingModel,
  isSummaryRequest,
  longRunModel,
  longRunTurn,
  makeTools,
  observation,
  planPlugin,
  program,
  promptText,
  runLive,
  stripObserved,
  structureProblems,
  summaryReply,
  writtenPath
} from "./fixtures.js"

const toolResults = (prompt: Prompt.Prompt) =>
  prompt.content.flatMap((m) => (m.role === "tool" ? m.content : [])) as Array<Prompt.ToolResultPart>

describe("CompactionPlugin", () => {
  it.effect("masks old bulky observations first, keeping each call with its result", () =>
    Effect.gen(function* () {
      const sm = longRunModel({ toolCalls: 9 })
      const { result, events, getBlob } = yield* runLive(
        program({ languageModel: sm.layer, plugins: [planPlugin, CompactionPlugin.make({ contextWindow: 8_000 })] })
      )
      expect(result.status).toBe("completed")
      const [first] = CompactionPlugin.fromEvents(events)
      expect(first).toBeDefined()
      expect(first!.data).toMatchObject({ compaction: 1, force: false, summarized: 0, summary: null, fallback: null })
      expect(first!.data.masked).toBeGreaterThan(0)
      expect(first!.data.after).toBeLessThan(first!.data.before)

      // the request right after the compaction: old outputs are stubs, the last three are intact
      const i = events.findIndex((e) => e.seq === first!.seq)
      const next = events.slice(i).find((e) => e.type === "model.requested")!
      const nth = events.filter((e) => e.type === "model.requested" && e.seq <= next.seq).length
      const prompt = sm.prompts[nth - 1]!
      expect(structureProblems(prompt)).toEqual([])
      const results = toolResults(prompt)
      const masked = results.filter((r) => typeof r.result === "string" && r.result.startsWith("[masked by compaction"))
      expect(masked.length).toBe(first!.data.masked)
      expect(results.slice(-3).every((r) => (r.result as string).startsWith("== module-"))).toBe(true)
      // a stub says what it was and where the full output is
      const stub = masked[0]!.result as string
      expect(stub).toMatch(
        /^\[masked by compaction: output of inspect \{"step":1\}, \d+ chars \(~\d+ tokens\), began "== module-1\.ts ==.*"; full output in blob sha256:[0-9a-f]{64}\]$/
      )
      const hash = /sha256:([0-9a-f]{64})/.exec(stub)![1]!
      expect(first!.data.dropped[0]).toEqual({ kind: "masked", what: expect.stringContaining("inspect"), blob: hash })
      expect(JSON.parse(new TextDecoder().decode(yield* getBlob(hash)))).toBe(observation(1))
    })
  )

  it.effect("falls back to a mechanical summary when the summary call fails; the turn goes on", () =>
    Effect.gen(function* () {
      const turn = longRunTurn({ toolCalls: 90 })
      const lm = failingModel((prompt) =>
        isSummaryRequest(prompt) ? { error: "429 rate limited: try again in 20 s" } : turn(prompt)
      )
      const plugins = [planPlugin, CompactionPlugin.make({ contextWindow: 8_000 })]
      const { result, events } = yield* runLive(program({ languageModel: lm.layer, plugins }))
      expect(result.status).toBe("completed")
      expect(result.toolCalls).toBe(90)
      const failures = events.filter((e) => e.type === "model.failed")
      expect(failures.length).toBeGreaterThan(0)
      expect(failures.every((e) => e.agent === "main/compactor")).toBe(true)

      const compactions = CompactionPlugin.fromEvents(events).filter((c) => c.data.summary !== null)
      expect(compactions.length).toBeGreaterThanOrEqual(3)
      for (const c of compactions) {
        expect(c.data.fallback).toContain("the summary model failed")
        expect(c.data.fallback).toContain("429 rate limited")
        expect(c.data.dropped.some((d) => d.kind === "dropped")).toBe(true)
        expect(c.data.dropped.some((d) => d.kind === "summarized")).toBe(false)
      }
      const last = compactions[compactions.length - 1]!.data.summary!
      expect(last).toContain("## Goal")
      expect(last).toMatch(/were removed without a summary \(the summary model failed: .*429 rate limited/)
      for (const step of [25, 50]) expect(last).toContain(writtenPath(step))

      const agentPrompts = lm.prompts.filter((p) => !isSummaryRequest(p))
      for (const p of agentPrompts) {
        expect(Tokens.countPrompt(p)).toBeLessThanOrEqual(8_000)
        expect(structureProblems(p)).toEqual([])
      }
      for (const fact of FACTS) expect(promptText(agentPrompts[agentPrompts.length - 1]!)).toContain(fact)

      const report = yield* Session.replay(program({ languageModel: Model.layerLanguageModelForbidden, plugins }), {
        events,
        verify: true
      })
      expect(report.matched).toBe(events.length)
    })
  )

  it.effect("a context-overflow error from the provider forces a compaction and the retry succeeds", () =>
    Effect.gen(function* () {
      // the provider's real limit is far below what the plugin believes (128k by default)
      const LIMIT = 3_000
      const run = (plugins: ReadonlyArray<any>) => {
        const turn = longRunTurn({ toolCalls: 12 })
        const lm = failingModel((prompt) => {
          const tokens = Tokens.countPrompt(prompt)
          return tokens > LIMIT
            ? {
                error: `This model's maximum context length is ${LIMIT} tokens. However, your messages resulted in ${tokens} tokens. (context_length_exceeded)`
              }
            : turn(prompt)
        })
        return Effect.map(runLive(program({ languageModel: lm.layer, plugins })), (r) => ({ ...r, lm }))
      }

      // without compaction the turn fails on the overflow
      const bare = yield* run([planPlugin])
      expect(bare.result.status).toBe("failed")
      expect(Model.isOverflow(bare.result.reason ?? "")).toBe(true)

      const plugins = [planPlugin, CompactionPlugin.make()]
      const { result, events, lm } = yield* run(plugins)
      expect(result.status).toBe("completed")
      expect(result.toolCalls).toBe(12)
      const main = events.filter((e) => e.agent === "main")
      const failed = main.findIndex((e) => e.type === "model.failed")
      expect(failed).toBeGreaterThan(0)
      expect((main[failed]!.data as any).error).toContain("context_length_exceeded")
      // overflow → compaction (forced) → the same request again, smaller, answered
      expect(main[failed + 1]!.type).toBe("context.compacted")
      const forced = main[failed + 1]!.data as CompactionPlugin.Compacted
      expect(forced.force).toBe(true)
      expect(forced.after).toBeLessThanOrEqual(Math.ceil(forced.before / 2) + 100)
      expect(main[failed + 2]!.type).toBe("model.requested")
      expect(main[failed + 3]!.type).toBe("model.responded")
      // no compaction happened before the provider complained: 128k was never approached
      expect(CompactionPlugin.fromEvents(events).every((c) => c.data.force)).toBe(true)
      const answered = lm.prompts.filter((p) => Tokens.countPrompt(p) <= LIMIT)
      expect(answered.length).toBe(lm.prompts.length - events.filter((e) => e.type === "model.failed").length)

      const report = yield* Session.replay(program({ languageModel: Model.layerLanguageModelForbidden, plugins }), {
        events,
        verify: true
      })
      expect(report.matched).toBe(events.length)
    })
  )

  it.effect("an output too big for the window on its own is cut to its start, never sent whole", () =>
    Effect.gen(function* () {
      const huge = observation(7, 40_000)
      const sm = longRunModel({ toolCalls: 1 })
      const tools = makeTools().map((t) =>
        t.name === "inspect" ? { ...t, handler: () => Effect.succeed(huge) } : t
      ) as ReturnType<typeof makeTools>
      const p = Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "x" })
        return yield* agent.send("look at module 7")
      }).pipe(
        Effect.provide(
          layerAgentServices({
            languageModel: sm.layer,
            tools,
            plugins: [CompactionPlugin.make({ contextWindow: 8_000 })]
          })
        )
      )
      const { result, events, getBlob } = yield* runLive(p)
      expect(result.status).toBe("completed")
      expect(Tokens.countText(huge)).toBeGreaterThan(8_000)
      for (const prompt of sm.prompts) expect(Tokens.countPrompt(prompt)).toBeLessThanOrEqual(8_000)
      const [c] = CompactionPlugin.fromEvents(events)
      expect(c!.data.dropped.map((d) => d.kind)).toEqual(["clipped"])
      const clipped = toolResults(sm.prompts[1]!)[0]!.result as string
      expect(clipped.startsWith(huge.slice(0, 400))).toBe(true)
      expect(clipped).toContain(`[clipped by compaction: ${huge.length} chars in all`)
      expect(JSON.parse(new TextDecoder().decode(yield* getBlob(c!.data.dropped[0]!.blob!)))).toBe(huge)
    })
  )

  it.effect("state is per agent: each agent is compacted on its own, with its own compactor", () =>
    Effect.gen(function* () {
      const turns = { main: longRunTurn({ toolCalls: 30 }), helper: longRunTurn({ toolCalls: 30 }) }
      const lm = failingModel((prompt) => {
        if (isSummaryRequest(prompt)) return summaryReply(prompt)
        const system = prompt.content[0]!.content as string
        return system.startsWith("helper") ? turns.helper(prompt) : turns.main(prompt)
      })
      const run = (agents?: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const main = yield* Agent.make({ name: "main", instructions: "main agent" })
          const helper = yield* Agent.make({ name: "helper", instructions: "helper agent" })
          yield* main.send("inspect modules")
          yield* helper.send("inspect modules too")
        }).pipe(
          Effect.provide(
            layerAgentServices({
              languageModel: lm.layer,
              tools: makeTools(),
              plugins: [CompactionPlugin.make({ contextWindow: 8_000, agents })]
            })
          )
        )
      const { events } = yield* runLive(run())
      const compactions = CompactionPlugin.fromEvents(events)
      for (const agent of ["main", "helper"]) {
        const mine = compactions.filter((c) => c.agent === agent)
        expect(mine.length).toBeGreaterThan(2)
        expect(mine.map((c) => c.data.compaction)).toEqual(mine.map((_, i) => i + 1))
        const compactor = events.filter((e) => e.type === "model.requested" && e.agent === `${agent}/compactor`)
        expect(compactor.length).toBe(mine.filter((c) => c.data.summary !== null).length)
      }

      turns.main = longRunTurn({ toolCalls: 30 })
      turns.helper = longRunTurn({ toolCalls: 30 })
      const only = yield* runLive(run(["helper"]))
      expect(new Set(CompactionPlugin.fromEvents(only.events).map((c) => c.agent))).toEqual(new Set(["helper"]))
    })
  )

  it.effect("is deterministic: the same session compacts the same way twice", () =>
    Effect.gen(function* () {
      const once = () =>
        runLive(
          program({
            languageModel: longRunModel({ toolCalls: 40 }).layer,
            plugins: [planPlugin, CompactionPlugin.make({ contextWindow: 8_000 })]
          })
        )
      const a = yield* once()
      const b = yield* once()
      expect(CompactionPlugin.fromEvents(a.events).length).toBeGreaterThan(3)
      expect(stripObserved(b.events)).toEqual(stripObserved(a.events))
      const observed = a.events.filter((e) => e.type === "context.compacted").map((e) => (e.data as any).observed)
      expect(observed.every((o) => typeof o.ms === "number")).toBe(true)
    })
  )

  it("rejects options that cannot work", () => {
    expect(() => CompactionPlugin.make({ target: 0.8 })).toThrow(CompactionPlugin.InvalidOptions)
    expect(() => CompactionPlugin.make({ trigger: 1.5 })).toThrow(/trigger must be in \(0, 1\]/)
    expect(() => CompactionPlugin.make({ contextWindow: 0 })).toThrow(/contextWindow must be positive/)
    expect(() => CompactionPlugin.make({ maskMinTokens: -1 })).toThrow(/maskMinTokens/)
    expect(CompactionPlugin.make().name).toBe("compaction")
  })

  it("budgets from the context-window option, a table function, or the default", () => {
    expect(CompactionPlugin.budgetFor({}, "x/unknown")).toEqual({
      window: 128_000,
      triggerTokens: 96_000,
      targetTokens: 64_000,
      reserveTokens: 12_800,
      maxSummaryTokens: 4_000
    })
    const table = (model: string) => (model === "a/small" ? 8_000 : undefined)
    expect(CompactionPlugin.budgetFor({ contextWindow: table }, "a/small")).toMatchObject({
      window: 8_000,
      triggerTokens: 6_000,
      reserveTokens: 800,
      maxSummaryTokens: 800
    })
    expect(CompactionPlugin.budgetFor({ contextWindow: table }, "a/other").window).toBe(128_000)
  })

  it("the compactor's prompt is the text of prompts/summary.md", () => {
    const file = fs.readFileSync(new URL("../prompts/summary.md", import.meta.url), "utf8")
    // src/internal/prompts.ts is regenerated by the build (tsup.config.ts); it must not drift
    expect(CompactionPlugin.summaryPrompt).toBe(file)
    for (const h of [
      "Goal",
      "Progress",
      "Decisions",
      "Constraints from the user",
      "Files touched",
      "Open todos",
      "Last errors"
    ]) {
      expect(file).toContain(`## ${h}\n`)
    }
  })

  it.effect("pinned messages and the summary survive; a pinned tool turn keeps its result", () =>
    Effect.gen(function* () {
      // a pinned assistant turn (e.g. a skill's plan written through a tool) is kept as a whole
      const sm = longRunModel({ toolCalls: 60 })
      const { events } = yield* runLive(
        program({ languageModel: sm.layer, plugins: [pinSecondStep, CompactionPlugin.make({ contextWindow: 8_000 })] })
      )
      expect(CompactionPlugin.fromEvents(events).filter((c) => c.data.summary).length).toBeGreaterThan(2)
      const last = sm.prompts.filter((p) => !isSummaryRequest(p)).at(-1)!
      expect(structureProblems(last)).toEqual([])
      const call = last.content.find((m) => m.role === "assistant" && m.options?.muse?.pin === true)
      expect(call).toBeDefined()
      const i = last.content.indexOf(call!)
      expect(last.content[i + 1]!.role).toBe("tool")
      expect((last.content[i + 1] as Prompt.ToolMessage).content[0]!.id).toBe("c2")
      // pinned outputs are never masked
      expect((last.content[i + 1] as Prompt.ToolMessage).content[0]!.result).toBe(observation(2))
    })
  )
})

/** Pins the assistant message of the agent's second step through `options.muse.pin`. */
const pinSecondStep = Plugin.make({
  name: "pin-second-step",
  hooks: {
    transformContext: {
      order: "pre",
      handler: (input) =>
        Effect.succeed(
          input.messages.map((m) =>
            m.role === "assistant" &&
            typeof m.content !== "string" &&
            m.content.some((p) => p.type === "tool-call" && p.id === "c2") &&
            m.options?.muse?.pin !== true
              ? { ...m, options: { ...m.options, muse: { pin: true } } }
              : m
          )
        )
    }
  }
})
