import { describe, expect, it } from "@effect/vitest"
import { Model, Session } from "@musekit/core"
import { Effect } from "effect"
import { CompactionPlugin, Tokens } from "../src/index.js"
import {
  BETA_MESSAGE,
  FACTS,
  isSummaryRequest,
  longRunModel,
  PLAN_TEXT,
  planPlugin,
  program,
  promptText,
  runLive,
  structureProblems,
  TASK
} from "./fixtures.js"

const WINDOW = 8_000

describe("a 1,000-tool-call session in an 8k window", () => {
  it.effect(
    "never sends a request over the window, keeps pinned facts and replays exactly",
    () =>
      Effect.gen(function* () {
        const sm = longRunModel({ toolCalls: 1_000 })
        const written: Array<string> = []
        const plugins = [planPlugin, CompactionPlugin.make({ contextWindow: WINDOW })]
        const { result, events, getBlob } = yield* runLive(program({ languageModel: sm.layer, plugins, written }))
        expect(result.status).toBe("completed")
        expect(result.toolCalls).toBe(1_000)
        expect(written.length).toBeGreaterThan(30)

        // every request — the agent's and the compactor's — fits the window, counted the same way
        const budget = CompactionPlugin.budgetFor({ contextWindow: WINDOW }, "scripted/test")
        const sizes = sm.prompts.map((p) => ({ tokens: Tokens.countPrompt(p), summary: isSummaryRequest(p) }))
        const agentSizes = sizes.filter((s) => !s.summary).map((s) => s.tokens)
        const summarySizes = sizes.filter((s) => s.summary).map((s) => s.tokens)
        expect(Math.max(...sizes.map((s) => s.tokens))).toBeLessThanOrEqual(WINDOW)
        // the agent's requests stay under the trigger, leaving the reply its reserve
        expect(Math.max(...agentSizes)).toBeLessThanOrEqual(budget.triggerTokens - budget.reserveTokens)
        expect(summarySizes.length).toBeGreaterThanOrEqual(5)

        // every request is well formed: no tool call without its result, no result without its call
        for (const p of sm.prompts) expect(structureProblems(p)).toEqual([])

        const compactions = CompactionPlugin.fromEvents(events)
        const summarized = compactions.filter((c) => c.data.summary !== null)
        expect(summarized.length).toBeGreaterThanOrEqual(5)
        expect(compactions.every((c) => c.data.after < c.data.before)).toBe(true)
        expect(compactions.map((c) => c.data.compaction)).toEqual(compactions.map((_, i) => i + 1))
        expect(compactions.every((c) => c.data.fallback === null)).toBe(true)

        // pinned facts are stated verbatim in every request after the fifth summary
        const fifth = summarized[4]!.seq
        const requestsAfter = events.filter((e) => e.type === "model.requested" && e.agent === "main" && e.seq > fifth)
        expect(requestsAfter.length).toBeGreaterThan(10)
        const agentPrompts = sm.prompts.filter((p) => !isSummaryRequest(p))
        const late = agentPrompts.slice(-requestsAfter.length)
        for (const p of late) {
          const text = promptText(p)
          for (const fact of FACTS) expect(text).toContain(fact)
          // the summary opens the context; the user's instructions follow verbatim
          const [system, first, second] = p.content
          expect(system!.role).toBe("system")
          expect(first!.role).toBe("user")
          expect((first as any).content[0].text).toMatch(/^\[Summary of earlier work: \d+ earlier turns/)
          expect((second as any).content[0].text).toBe(TASK)
          const pinned = p.content.find((m) => m.options?.muse?.pin === true) as any
          expect(pinned?.content[0].text).toBe(PLAN_TEXT)
          expect(p.content.some((m: any) => m.role === "user" && m.content[0]?.text === BETA_MESSAGE)).toBe(true)
        }

        // files written in summarized turns are listed in the last summary (the compactor left them out)
        const last = summarized[summarized.length - 1]!.data
        const lastSummarizedStep = Math.max(
          ...last.dropped.flatMap((d) => [...d.what.matchAll(/inspect \{"step":(\d+)\}/g)].map((m) => Number(m[1])))
        )
        const expectedFiles = written.filter((p) => Number(/fix-(\d+)/.exec(p)![1]) <= lastSummarizedStep)
        expect(expectedFiles.length).toBeGreaterThan(20)
        const listed = expectedFiles.filter((f) => last.summary!.includes(f))
        // the section shows the latest 40 entries; older ones are counted
        expect(listed).toEqual(expectedFiles.slice(-40))
        if (expectedFiles.length > 40)
          expect(last.summary).toContain("earlier entries are in the context.compacted events")

        // a masked output is a stub naming the call and the blob that holds the full output
        const masked = compactions
          .flatMap((c) => c.data.dropped)
          .find((d) => d.kind === "masked" && d.what.startsWith("inspect"))!
        const blob = yield* getBlob(masked.blob!)
        const step = Number(/"step":(\d+)/.exec(masked.what)![1])
        expect(JSON.parse(new TextDecoder().decode(blob))).toContain(`== module-${step}.ts ==`)

        // replay: no model call, the same events byte for byte
        const report = yield* Session.replay(program({ languageModel: Model.layerLanguageModelForbidden, plugins }), {
          events,
          verify: true
        })
        expect(report).toEqual({ matched: events.length, total: events.length, endedEarly: false })
      }),
    { timeout: 240_000 }
  )

  it.effect("without the plugin the same session outgrows the window (the size check can fail)", () =>
    Effect.gen(function* () {
      const sm = longRunModel({ toolCalls: 40 })
      yield* runLive(program({ languageModel: sm.layer, plugins: [planPlugin] }))
      expect(Math.max(...sm.prompts.map((p) => Tokens.countPrompt(p)))).toBeGreaterThan(WINDOW)
    })
  )
})
