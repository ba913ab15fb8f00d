/**
 * Context compaction (`@musekit/plugin-compaction`) on long scripted coding sessions: an agent
 * makes 1,000 tool calls of ~2.4 KB output each (about 670 tokens), writes a file every 25 steps,
 * and has facts planted early — three pinned (the first user message, a `<pinned>` message and a
 * plan pinned with `options.muse.pin`) and three unpinned (in a tool output, in an assistant reply
 * and in a later user message).
 *
 * Per scenario: compactions (masking only / with a summary), tokens before → after, time per
 * compaction (recorded in each `context.compacted` event), the largest request against the window,
 * and after each compaction how many planted facts the next request still states. The summary
 * model is scripted, so summary calls cost no model time here: "naive" writes a summary that keeps
 * none of the planted facts; "extractive" carries every `FACT-` sentence it is shown; "failing"
 * errors, so the plugin's mechanical summary is used. Also: token counting speed.
 *
 * Run alone with `npx tsx bench/compaction.ts` (or `pnpm bench compaction`). Figures also go to
 * `bench/out/compaction.json`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { Prompt, Response } from "@effect/ai"
import { Agent, type Event, Session } from "@musekit/core"
import { layerAgentServices, Scripted } from "@musekit/core/testing"
import { Effect, Option } from "effect"
import { CompactionPlugin, Tokens } from "../plugins/compaction/src/index.js"
import {
  type Answer,
  BETA_MESSAGE,
  FACT_ALPHA,
  FACT_BETA,
  FACT_GAMMA,
  failingModel,
  fileContent,
  isSummaryRequest,
  makeTools,
  observation,
  planPlugin,
  promptText,
  runLive,
  summaryReply,
  TASK,
  writtenPath
} from "../plugins/compaction/test/fixtures.js"

export const description =
  "compaction over 1,000 tool calls: tokens before → after, ms per compaction, planted facts still stated"

const TOOL_CALLS = Number(process.env.BENCH_COMPACTION_CALLS ?? 1_000)

const FACT_DELTA = "FACT-DELTA: the flaky parser test fails only when TZ is not UTC."
const FACT_EPSILON = "FACT-EPSILON: the user prefers small commits with conventional messages."
const FACT_ZETA = "FACT-ZETA: module-12 exports a deprecated createLegacyParser that must stay."

const PROBES = [
  { fact: FACT_ALPHA, where: "first user message (pinned)" },
  { fact: FACT_BETA, where: "<pinned> user message" },
  { fact: FACT_GAMMA, where: "plan, options.muse.pin" },
  { fact: FACT_DELTA, where: "tool output, step 5" },
  { fact: FACT_EPSILON, where: "user message, unpinned" },
  { fact: FACT_ZETA, where: "assistant reply, step 12" }
] as const

type Summarizer = "naive" | "extractive" | "failing"

/** A summary that keeps every `FACT-` sentence it is shown (previous summary included). */
const extractiveReply = (prompt: Prompt.Prompt): ReadonlyArray<Response.PartEncoded> => {
  const base = (summaryReply(prompt)[0] as { text: string }).text
  const shown = promptText(prompt)
  const facts = [...new Set([...shown.matchAll(/FACT-[A-Z]+: [^"\n\\]*?\./g)].map((m) => m[0]))]
  const pinned = new Set<string>([FACT_ALPHA, FACT_BETA, FACT_GAMMA])
  const keep = facts.filter((f) => !pinned.has(f))
  return Scripted.text(base.replace("## Decisions\n", `## Decisions\n${keep.map((f) => `- ${f}\n`).join("")}`))
}

/** The agent's script: inspect module after module, plant the unpinned facts early. */
const agentTurn = (toolCalls: number) => {
  let calls = 0
  let step = 0
  return (): ReadonlyArray<Response.PartEncoded> => {
    if (calls >= toolCalls) return Scripted.text(`Inspected ${step} modules.`)
    step += 1
    const list: Array<{ id: string; name: string; params: unknown }> = [
      { id: `c${step}`, name: "inspect", params: { step } }
    ]
    if (step % 25 === 0 && calls + 1 < toolCalls) {
      list.push({ id: `w${step}`, name: "write_file", params: { path: writtenPath(step), content: fileContent(step) } })
    }
    calls += list.length
    return Scripted.toolCalls(list, step === 12 ? { text: `Noted: ${FACT_ZETA}` } : {})
  }
}

const session = (window: number, summarizer: Summarizer) => {
  const turn = agentTurn(TOOL_CALLS)
  const lm = failingModel((prompt): Answer => {
    if (!isSummaryRequest(prompt)) return turn()
    if (summarizer === "failing") return { error: "503 service unavailable" }
    return summarizer === "extractive" ? extractiveReply(prompt) : summaryReply(prompt)
  })
  const tools = makeTools().map((t) =>
    t.name === "inspect"
      ? {
          ...t,
          handler: ({ step }: { step: number }) =>
            Effect.succeed(
              step === 5
                ? `${observation(step, 1_200)}\n// ${FACT_DELTA}\n${observation(-5, 1_200)}`
                : observation(step)
            )
        }
      : t
  ) as ReturnType<typeof makeTools>
  let polls = 0
  const inbox: Agent.Inbox = {
    take: Effect.sync(() => {
      polls += 1
      if (polls === 3) return Option.some({ id: "beta", from: "user", text: BETA_MESSAGE })
      if (polls === 8) return Option.some({ id: "eps", from: "user", text: `By the way: ${FACT_EPSILON}` })
      return Option.none()
    })
  }
  const plugins = [planPlugin, CompactionPlugin.make({ contextWindow: window })]
  const program = Effect.gen(function* () {
    const agent = yield* Agent.make({ name: "main", instructions: "You are a careful coding agent.", inbox })
    return yield* agent.send(TASK)
  }).pipe(Effect.provide(layerAgentServices({ languageModel: lm.layer, tools, plugins })))
  return { program, lm }
}

const percentile = (xs: ReadonlyArray<number>, q: number) => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!
}
const mean = (xs: ReadonlyArray<number>) => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length)
const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "-")
const ms = (n: number) => (Number.isFinite(n) ? (n >= 10 ? n.toFixed(1) : n.toFixed(2)) : "-")
const pct = (r: number) => `${(r * 100).toFixed(0)}%`

const table = (title: string, header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  process.stdout.write(
    `\n${title}\n${line(header)}\n${widths.map((w) => "-".repeat(w)).join("  ")}\n${rows.map(line).join("\n")}\n`
  )
}

interface ScenarioFigures {
  readonly window: number
  readonly summarizer: Summarizer
  readonly toolCalls: number
  readonly status: string
  readonly seconds: number
  readonly replaySeconds: number
  readonly replayExact: boolean
  readonly compactions: number
  readonly withSummary: number
  readonly beforeMean: number
  readonly afterMean: number
  readonly reductionMean: number
  readonly msMaskP50: number
  readonly msMaskP95: number
  readonly msSummaryP50: number
  readonly msSummaryP95: number
  readonly maxRequest: number
  readonly maxSummaryRequest: number
  readonly requests: number
  readonly factsAfter: ReadonlyArray<number>
  readonly factSurvival: Record<string, number>
}

/** Facts stated by the first agent request after each compaction. */
const probe = (events: ReadonlyArray<Event.Envelope>, prompts: ReadonlyArray<Prompt.Prompt>) => {
  const agentPrompts = prompts.filter((p) => !isSummaryRequest(p))
  const requests = events.filter((e) => e.type === "model.requested" && e.agent === "main")
  return CompactionPlugin.fromEvents(events).map((c) => {
    const next = requests.findIndex((r) => r.seq > c.seq)
    const text = next >= 0 ? promptText(agentPrompts[next]!) : ""
    return PROBES.map((p) => text.includes(p.fact))
  })
}

const scenario = async (window: number, summarizer: Summarizer): Promise<ScenarioFigures> => {
  const { program, lm } = session(window, summarizer)
  const t0 = performance.now()
  const { result, events } = await Effect.runPromise(runLive(program))
  const seconds = (performance.now() - t0) / 1000
  const replayed = session(window, summarizer)
  const t1 = performance.now()
  const report = await Effect.runPromise(Session.replay(replayed.program, { events, verify: true }))
  const replaySeconds = (performance.now() - t1) / 1000
  const compactions = events.filter((e) => e.type === "context.compacted")
  const data = compactions.map((e) => e.data as CompactionPlugin.Compacted & { observed?: { ms: number } })
  const masks = data.filter((d) => d.summary === null)
  const summaries = data.filter((d) => d.summary !== null)
  const sizes = lm.prompts.map((p) => ({ summary: isSummaryRequest(p), tokens: Tokens.countPrompt(p) }))
  const probes = probe(events, lm.prompts)
  const factSurvival: Record<string, number> = {}
  PROBES.forEach((p, i) => {
    const kept = probes.filter((row) => row[i]).length
    factSurvival[p.where] = probes.length === 0 ? Number.NaN : kept / probes.length
  })
  return {
    window,
    summarizer,
    toolCalls: result.toolCalls,
    status: result.status,
    seconds,
    replaySeconds,
    replayExact: report.matched === events.length,
    compactions: data.length,
    withSummary: summaries.length,
    beforeMean: mean(data.map((d) => d.before)),
    afterMean: mean(data.map((d) => d.after)),
    reductionMean: mean(data.map((d) => 1 - d.after / d.before)),
    msMaskP50: percentile(
      masks.map((d) => d.observed?.ms ?? Number.NaN),
      0.5
    ),
    msMaskP95: percentile(
      masks.map((d) => d.observed?.ms ?? Number.NaN),
      0.95
    ),
    msSummaryP50: percentile(
      summaries.map((d) => d.observed?.ms ?? Number.NaN),
      0.5
    ),
    msSummaryP95: percentile(
      summaries.map((d) => d.observed?.ms ?? Number.NaN),
      0.95
    ),
    maxRequest: Math.max(...sizes.filter((s) => !s.summary).map((s) => s.tokens)),
    maxSummaryRequest: Math.max(0, ...sizes.filter((s) => s.summary).map((s) => s.tokens)),
    requests: sizes.filter((s) => !s.summary).length,
    factsAfter: probes.map((row) => row.filter(Boolean).length),
    factSurvival
  }
}

/** Token counting speed: 1 MiB of code-like text, the quadratic case, a cached 1,000-message history. */
const counting = () => {
  const code = Array.from({ length: 450 }, (_, i) => observation(i, 2_330)).join("\n")
  let t = performance.now()
  const codeTokens = Tokens.countText(code)
  const codeMs = performance.now() - t
  const cjk = "漢字仮名交じり文".repeat(12_500)
  t = performance.now()
  Tokens.countText(cjk)
  const cjkMs = performance.now() - t
  const counter = Tokens.makeCounter()
  const history: Array<Prompt.MessageEncoded> = Array.from({ length: 1_000 }, (_, i) => ({
    role: "tool" as const,
    content: [
      {
        type: "tool-result" as const,
        id: `c${i}`,
        name: "inspect",
        isFailure: false,
        result: observation(i),
        providerExecuted: false
      }
    ]
  }))
  t = performance.now()
  counter.messages(history)
  const coldMs = performance.now() - t
  t = performance.now()
  counter.messages(history)
  const warmMs = performance.now() - t
  return { codeBytes: code.length, codeTokens, codeMs, cjkChars: cjk.length, cjkMs, coldMs, warmMs }
}

export const run = async (): Promise<void> => {
  const scenarios: Array<[number, Summarizer]> = [
    [8_000, "naive"],
    [8_000, "extractive"],
    [8_000, "failing"],
    [32_000, "extractive"]
  ]
  const results: Array<ScenarioFigures> = []
  for (const [window, summarizer] of scenarios) results.push(await scenario(window, summarizer))

  table(
    `Compaction over ${int(TOOL_CALLS)} tool calls (~670-token outputs)`,
    [
      "window / summary",
      "compactions",
      "w/ summary",
      "before",
      "after",
      "cut",
      "ms mask p50/p95",
      "ms summary p50/p95",
      "max request",
      "run s",
      "replay s"
    ],
    results.map((r) => [
      `${int(r.window)} / ${r.summarizer}`,
      int(r.compactions),
      int(r.withSummary),
      int(r.beforeMean),
      int(r.afterMean),
      pct(r.reductionMean),
      `${ms(r.msMaskP50)} / ${ms(r.msMaskP95)}`,
      `${ms(r.msSummaryP50)} / ${ms(r.msSummaryP95)}`,
      `${int(r.maxRequest)}${r.maxRequest <= r.window ? "" : " OVER"}`,
      r.seconds.toFixed(1),
      `${r.replaySeconds.toFixed(1)}${r.replayExact ? "" : " DIVERGED"}`
    ])
  )

  table(
    "Planted facts stated in the request after each compaction (share of compactions)",
    ["fact", ...results.map((r) => `${int(r.window)}/${r.summarizer}`)],
    PROBES.map((p) => [p.where, ...results.map((r) => pct(r.factSurvival[p.where] ?? Number.NaN))])
  )

  const checkpoints = [1, 2, 5, 10, 20, 50, 100, 200]
  table(
    `Facts stated (of ${PROBES.length}) after compaction n`,
    ["scenario", ...checkpoints.map((n) => `#${n}`), "last"],
    results.map((r) => [
      `${int(r.window)}/${r.summarizer}`,
      ...checkpoints.map((n) => (r.factsAfter[n - 1] === undefined ? "-" : String(r.factsAfter[n - 1]))),
      String(r.factsAfter[r.factsAfter.length - 1] ?? "-")
    ])
  )

  const c = counting()
  table(
    "Token counting (gpt-tokenizer o200k, 1,000-char slices)",
    ["case", "size", "ms"],
    [
      ["code-like text", `${int(c.codeBytes)} chars → ${int(c.codeTokens)} tokens`, ms(c.codeMs)],
      ["CJK without spaces (quadratic unsliced)", `${int(c.cjkChars)} chars`, ms(c.cjkMs)],
      ["1,000 tool results, first count", "1,000 messages", ms(c.coldMs)],
      ["same history again (cached)", "1,000 messages", ms(c.warmMs)]
    ]
  )

  const outDir = fileURLToPath(new URL("./out/", import.meta.url))
  fs.mkdirSync(outDir, { recursive: true })
  const machine = `${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? "unknown"}), Node ${process.version}`
  fs.writeFileSync(
    path.join(outDir, "compaction.json"),
    `${JSON.stringify({ bench: "compaction", at: new Date().toISOString(), machine, figures: { scenarios: results, counting: c } }, null, 2)}\n`
  )
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) await run()
