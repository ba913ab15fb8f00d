/**
 * Harness overhead of the agent loop: a 1,000-tool-call session with an instant scripted model and
 * durable logging on, beside a bare loop that makes the same model calls and tool calls with no
 * harness at all (no log, no approvals, no hooks). Each arm runs in its own process so its peak
 * RSS is its own.
 *
 * ```sh
 * pnpm bench agent
 * ```
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { LanguageModel, Prompt, type Response } from "@effect/ai"
import { Effect, Layer, Schema, Stream } from "effect"
import { Agent, Approvals, Model, Plugin, Session, Tools, Workspace } from "../packages/core/src/index.js"
import { EventLogFile } from "../packages/node/src/index.js"
import { bundle, fmtMs, printTable, writeFigures } from "./report.js"

export const description = "agent loop overhead per tool-call turn over 1,000 tool calls, durable log on"

const TOOL_CALLS = 1000
const OUTPUT = "x".repeat(400)

const readTool = Tools.make({
  name: "read_note",
  description: "Read a note",
  parameters: { name: Schema.String },
  effect: "read",
  handler: ({ name }) => Effect.succeed({ name, text: OUTPUT })
})

/** An instant model: one tool call per reply until TOOL_CALLS, then a final text. */
const scripted = () => {
  let n = 0
  const reply = (): Array<Response.PartEncoded> => {
    const i = n++
    const usage = { inputTokens: 100, outputTokens: 10, totalTokens: 110 }
    if (i >= TOOL_CALLS)
      return [
        { type: "text", text: "done" },
        { type: "finish", reason: "stop", usage }
      ]
    return [
      { type: "tool-call", id: `c${i}`, name: "read_note", params: { name: `n${i % 50}` }, providerExecuted: false },
      { type: "finish", reason: "tool-calls", usage }
    ]
  }
  return Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.sync(reply),
      streamText: () =>
        Stream.suspend(() =>
          Stream.fromIterable(
            reply().flatMap(
              (p): Array<Response.StreamPartEncoded> =>
                p.type === "text"
                  ? [
                      { type: "text-start", id: "t" },
                      { type: "text-delta", id: "t", delta: p.text },
                      { type: "text-end", id: "t" }
                    ]
                  : [p as Response.StreamPartEncoded]
            )
          )
        )
    })
  )
}

const harness = async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-agent-"))
  const program = Effect.gen(function* () {
    const agent = yield* Agent.make({ name: "main", instructions: "bench" })
    return yield* agent.send("go")
  }).pipe(
    Effect.provide(
      Layer.mergeAll(
        Model.layer("scripted/bench").pipe(Layer.provide(scripted())),
        Tools.layer([readTool]),
        Approvals.layer({ mode: "auto" }),
        Approvals.layerPrompterDeny,
        Workspace.layerLexical("/w"),
        Plugin.layerEmpty
      )
    )
  )
  const t0 = performance.now()
  const result = await Effect.runPromise(
    Session.run(program).pipe(Effect.provide(EventLogFile.layer({ dir, session: "bench", create: true })))
  )
  const ms = performance.now() - t0
  const events = fs.readFileSync(path.join(dir, "sessions", "bench.jsonl"), "utf8").split("\n").length - 1
  fs.rmSync(dir, { recursive: true, force: true })
  return { ms, toolCalls: result.toolCalls, events }
}

/** The same model and tool calls with nothing around them: the floor. */
const bare = async () => {
  const lm = scripted()
  const tk = { tools: { read_note: Tools.toAiTool(readTool) }, handle: () => Effect.die("unused") } as any
  const program = Effect.gen(function* () {
    const model = yield* LanguageModel.LanguageModel
    const decode = Schema.decodeSync(Prompt.Message)
    const messages: Array<Prompt.Message> = [
      decode({ role: "system", content: "bench" }),
      decode({ role: "user", content: "go" })
    ]
    let calls = 0
    while (true) {
      const parts: Array<any> = []
      yield* Stream.runForEach(
        model.streamText({
          prompt: Prompt.fromMessages(messages),
          toolkit: tk,
          disableToolCallResolution: true
        }) as Stream.Stream<any>,
        (p) => Effect.sync(() => void parts.push(p))
      )
      const toolCalls = parts.filter((p) => p.type === "tool-call")
      if (toolCalls.length === 0) return calls
      messages.push(
        decode({
          role: "assistant",
          content: toolCalls.map((c) => ({
            type: "tool-call",
            id: c.id,
            name: c.name,
            params: c.params,
            providerExecuted: false
          }))
        })
      )
      const results = []
      for (const c of toolCalls) {
        calls++
        const r = yield* readTool.handler(c.params, {} as any)
        results.push({
          type: "tool-result" as const,
          id: c.id,
          name: c.name,
          isFailure: false,
          result: r,
          providerExecuted: false
        })
      }
      messages.push(decode({ role: "tool", content: results }))
    }
  }).pipe(Effect.scoped, Effect.provide(lm))
  const t0 = performance.now()
  const toolCalls = await Effect.runPromise(program)
  return { ms: performance.now() - t0, toolCalls, events: 0 }
}

const arm = async (name: string) => {
  const r = name === "harness" ? await harness() : await bare()
  const rss = process.resourceUsage().maxRSS * 1024
  process.stdout.write(`${JSON.stringify({ ...r, rss })}\n`)
}

const runArm = (file: string, name: string) => {
  const out = spawnSync(process.execPath, [file, "--arm", name], { encoding: "utf8" })
  if (out.status !== 0) throw new Error(`${name} arm failed:\n${out.stderr}`)
  return JSON.parse(out.stdout.trim().split("\n").pop()!) as {
    ms: number
    toolCalls: number
    events: number
    rss: number
  }
}

export const run = async () => {
  const rows: Array<Array<string>> = []
  const figures: Record<string, unknown> = {}
  const samples: Array<{ h: ReturnType<typeof runArm>; b: ReturnType<typeof runArm> }> = []
  const file = await bundle(fileURLToPath(import.meta.url), "agent")
  for (let i = 0; i < 3; i++) samples.push({ b: runArm(file, "bare"), h: runArm(file, "harness") })
  const best = (k: "h" | "b") => samples.map((s) => s[k]).sort((x, y) => x.ms - y.ms)[0]!
  const h = best("h")
  const b = best("b")
  const perTurnH = h.ms / h.toolCalls
  const perTurnB = b.ms / b.toolCalls
  rows.push(["bare loop (no harness, no log)", fmtMs(b.ms), fmtMs(perTurnB), "-", `${(b.rss / 2 ** 20).toFixed(0)} MB`])
  rows.push([
    "agent loop + durable file log",
    fmtMs(h.ms),
    fmtMs(perTurnH),
    String(h.events),
    `${(h.rss / 2 ** 20).toFixed(0)} MB`
  ])
  printTable(
    `${TOOL_CALLS} tool calls, one per model reply (best of 3 runs per arm)`,
    ["arm", "total", "per turn", "events", "peak RSS"],
    rows
  )
  const overhead = perTurnH - perTurnB
  process.stdout.write(
    `\nharness overhead per tool-call turn: ${fmtMs(overhead)} (aim <= 3 ms); harness / bare = ${(h.ms / b.ms).toFixed(2)}x; peak RSS ${(h.rss / 2 ** 20).toFixed(0)} MB (aim <= 150 MB)\n`
  )
  figures.harness = h
  figures.bare = b
  figures.overheadPerTurnMs = overhead
  writeFigures("agent", figures)
}

if (process.argv.includes("--arm")) {
  await arm(process.argv[process.argv.indexOf("--arm") + 1]!)
} else if (import.meta.url === `file://${process.argv[1]}` && !process.argv[1]!.endsWith(".mjs")) {
  await run()
}
