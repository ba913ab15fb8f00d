/**
 * The crew (DESIGN.md §4) on scripted, instant models, in two parts.
 *
 * 1. Prefix stability and the context-gathering tax. The main agent delegates 20 tasks to one
 *    persistent member, `worker-1`. Every task is scripted the same way: read the 3 context files
 *    (README.md, package.json, docs/BUILD.md, ~4 KB each) unless their contents are already in the
 *    conversation, then `grep` for the task's symbol, then read the task's file (~2 KB), then answer
 *    in one line. The member reads the context files in its first task only (they stay in its
 *    history); the baseline, a fresh agent per task (`Agent.make` with a new name, the member's exact
 *    system prompt and tools), reads them in every task. Each model request is serialized as a
 *    provider sees it — system prompt, then tools (name, description, JSON schema), then the
 *    messages in order, as JSON; cache-control markers (provider options) are left out, they say
 *    where to cache, not what — and compared byte for byte with the previous request of the same
 *    series (for a fresh agent's first request, that is the previous task's last request, made by
 *    another agent). The shared leading bytes are what a provider's prompt cache can reuse.
 * 2. Throughput. The main agent delegates one task each to 16 members (62 or 63 calls of a cheap
 *    tool, one call per model reply, 1,000 tool calls in all) on a durable file log
 *    (`EventLogFile`), until the crew is idle. Baselines: the same 16 tasks for one crew member,
 *    and for a single agent without a crew (16 `send`s in a row). Wall time, CPU time, events
 *    written, events/s, peak RSS, ms per tool call; median of 3 rounds, the order rotating per round.
 *
 * Run with `pnpm bench crew` (or `npx tsx bench/run.ts crew`). Figures also go to `bench/out/crew.json`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { LanguageModel, Prompt, type Response, Tool } from "@effect/ai"
import { Effect, Layer, Schema, Stream } from "effect"
import { Agent, Crew, EventLog, Session, Tools } from "../packages/core/src/index.js"
import { agentOf, layerAgentServices, Scripted } from "../packages/core/src/testing.js"
import { EventLogFile } from "../packages/node/src/index.js"
import { fmtInt, fmtMs, fmtPct, percentile, printTable, writeFigures } from "./report.js"

export const description =
  "crew: prefix reuse of a persistent member vs a fresh agent per task; 16 members × 1,000 tool calls on a file log"

const TASKS = Number(process.env.BENCH_CREW_TASKS ?? 20)
const MEMBERS = Number(process.env.BENCH_CREW_MEMBERS ?? 16)
const TOTAL_CALLS = Number(process.env.BENCH_CREW_CALLS ?? 1_000)
const ROUNDS = Number(process.env.BENCH_CREW_ROUNDS ?? 3)

// ---------------------------------------------------------------------------------------------
// A scripted language model that also keeps what each request carried (prompt and tools)
// ---------------------------------------------------------------------------------------------

type Reply = ReadonlyArray<Response.PartEncoded>

interface Captured {
  readonly prompt: Prompt.Prompt
  readonly tools: ReadonlyArray<Tool.Any>
}

const toStream = (parts: Reply): Array<Response.StreamPartEncoded> =>
  parts.flatMap(
    (p): Array<Response.StreamPartEncoded> =>
      p.type === "text"
        ? [
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: p.text },
            { type: "text-end", id: "t" }
          ]
        : [p as Response.StreamPartEncoded]
  )

const instantModel = (
  reply: (prompt: Prompt.Prompt) => Reply,
  captured?: Array<Captured>
): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (opts) => Effect.sync(() => [...reply(opts.prompt)]),
      streamText: (opts) =>
        Stream.suspend(() => {
          captured?.push({ prompt: opts.prompt, tools: opts.tools })
          return Stream.fromIterable(toStream(reply(opts.prompt)))
        })
    })
  )

const isMember = (prompt: Prompt.Prompt) => agentOf(prompt) !== "main"

const userText = (m: Prompt.Message | undefined): string =>
  m?.role === "user"
    ? m.content
        .filter((p) => p.type === "text")
        .map((p) => (p as Prompt.TextPart).text)
        .join("\n")
    : ""

/** Index of the newest user message that starts with `prefix` (the task), or -1. */
const taskIndex = (messages: ReadonlyArray<Prompt.Message>, prefix: string) => {
  for (let i = messages.length - 1; i >= 0; i--) if (userText(messages[i]).startsWith(prefix)) return i
  return -1
}

// ---------------------------------------------------------------------------------------------
// Part 1: the repository the tasks read
// ---------------------------------------------------------------------------------------------

const CONTEXT_FILES = ["README.md", "package.json", "docs/BUILD.md"] as const
const CONTEXT_BYTES = 4096
const TASK_FILE_BYTES = 2048

const WORDS =
  "build package workspace tsup vitest biome changeset module export import config script test lint release dist source entry node effect layer schema agent tool event log replay session"
    .split(" ")
    .filter((w) => w.length > 0)

/** Deterministic text of about `bytes` bytes, different for every name. */
const fileText = (name: string, bytes: number): string => {
  let seed = 0
  for (const ch of name) seed = (seed * 31 + ch.charCodeAt(0)) >>> 0
  const next = () => {
    seed = (seed * 1664525 + 1013904223) >>> 0
    return seed
  }
  let out = `// ${name}\n`
  for (let line = 1; out.length < bytes; line++) {
    const words = Array.from({ length: 6 + (next() % 8) }, () => WORDS[next() % WORDS.length]!)
    out += `${line}: ${words.join(" ")}\n`
  }
  return out.slice(0, bytes)
}

const symbolOf = (task: number) => `featureFlag${task}`
const taskPath = (task: number) => `src/features/feature-${task}.ts`
const taskText = (task: number) =>
  `Task ${task}: make ${symbolOf(task)} handle empty input and keep the build green. Answer in one line.`

const repoFile = (p: string): string | undefined => {
  if ((CONTEXT_FILES as ReadonlyArray<string>).includes(p)) return fileText(p, CONTEXT_BYTES)
  const m = /^src\/features\/feature-(\d+)\.ts$/.exec(p)
  return m ? fileText(p, TASK_FILE_BYTES) : undefined
}

const repoTools = [
  Tools.make({
    name: "read_file",
    description: "Read a file of the repository.",
    parameters: { path: Schema.String },
    effect: "read",
    handler: ({ path: p }) => {
      const content = repoFile(p)
      return content === undefined
        ? Effect.fail(new Tools.ToolError({ message: `no such file: ${p}` }))
        : Effect.succeed({ path: p, content })
    }
  }),
  Tools.make({
    name: "grep",
    description: "Search the repository for a pattern.",
    parameters: { pattern: Schema.String },
    effect: "read",
    handler: ({ pattern }) => {
      const task = Number(/(\d+)$/.exec(pattern)?.[1] ?? 0)
      return Effect.succeed({
        pattern,
        matches: [
          { path: taskPath(task), line: 12, text: `export const ${pattern} = (input: string) => input.trim()` },
          { path: `src/index.ts`, line: 40 + task, text: `export { ${pattern} } from "./features/feature-${task}.js"` },
          { path: `test/feature-${task}.test.ts`, line: 3, text: `import { ${pattern} } from "../src/index.js"` }
        ]
      })
    }
  })
]

/**
 * The member's behaviour, decided from the prompt alone: read each context file that is not in the
 * conversation yet, then grep for the task's symbol, then read the task's file, then answer.
 */
const workerReply = (prompt: Prompt.Prompt): Reply => {
  const messages = prompt.content
  const at = taskIndex(messages, "Task ")
  const task = Number(/^Task (\d+)/.exec(userText(messages[at]))?.[1] ?? 0)
  const read = new Set<string>()
  let grepped = false
  let readTask = false
  messages.forEach((m, i) => {
    if (m.role !== "tool") return
    for (const part of m.content) {
      if (part.isFailure) continue
      if (part.name === "read_file") {
        const p = (part.result as { path: string }).path
        read.add(p)
        if (i > at && p === taskPath(task)) readTask = true
      }
      if (part.name === "grep" && i > at) grepped = true
    }
  })
  const step = messages.slice(at + 1).filter((m) => m.role === "assistant").length
  const id = `t${task}-s${step}`
  const missing = CONTEXT_FILES.find((f) => !read.has(f))
  if (missing) return Scripted.toolCalls([{ id, name: "read_file", params: { path: missing } }])
  if (!grepped) return Scripted.toolCalls([{ id, name: "grep", params: { pattern: symbolOf(task) } }])
  if (!readTask) return Scripted.toolCalls([{ id, name: "read_file", params: { path: taskPath(task) } }])
  return Scripted.text(
    `Task ${task} done: ${symbolOf(task)} in ${taskPath(task)} now handles empty input; build passes.`
  )
}

/** Main: delegate every task to worker-1 in its first reply, then acknowledge reports. */
const prefixMainReply = (prompt: Prompt.Prompt): Reply =>
  prompt.content.some((m) => m.role === "assistant")
    ? Scripted.text("ok")
    : Scripted.toolCalls(
        Array.from({ length: TASKS }, (_, i) => ({
          id: `d${i + 1}`,
          name: "delegate",
          params: { to: "worker-1", task: taskText(i + 1) }
        }))
      )

/** The same tool as the crew's `report` (name, description, parameters), for the fresh agents. */
const reportLookalike = Tools.make({
  name: "report",
  description:
    "Report to the main agent. importance: 'blocking' (you need a decision now), 'notable' (a result or finding), 'info' (progress; folded into digests).",
  parameters: { importance: Schema.Literal("info", "notable", "blocking"), text: Schema.String },
  effect: "read",
  internal: true,
  handler: ({ importance }) => Effect.succeed({ delivered: importance })
})

// ---------------------------------------------------------------------------------------------
// Serialization as a provider sees a request, and prefix reuse
// ---------------------------------------------------------------------------------------------

const encodePrompt = Schema.encodeSync(Prompt.Prompt)

const withoutOptions = (m: Prompt.MessageEncoded): unknown => {
  const { options: _options, ...rest } = m as Prompt.MessageEncoded & { options?: unknown }
  if (!Array.isArray(rest.content)) return rest
  return {
    ...rest,
    content: (rest.content as ReadonlyArray<{ options?: unknown }>).map(({ options: _o, ...p }) => p)
  }
}

/** System prompt, then tools, then the messages, in order (the tools' JSON is the same for every request of an arm). */
const serialize = (c: Captured): Buffer => {
  const messages = encodePrompt(c.prompt).content
  const system = messages.filter((m) => m.role === "system").map(withoutOptions)
  const rest = messages.filter((m) => m.role !== "system").map(withoutOptions)
  const tools = c.tools.map((t) => ({
    name: t.name,
    description: Tool.getDescription(t as any) ?? "",
    input_schema: Tool.getJsonSchema(t as any)
  }))
  return Buffer.from([JSON.stringify(system), JSON.stringify(tools), ...rest.map((m) => JSON.stringify(m))].join("\n"))
}

const commonPrefix = (a: Buffer, b: Buffer): number => {
  const n = Math.min(a.length, b.length)
  // compare 4 KiB blocks first, then bytes
  let i = 0
  while (i + 4096 <= n && a.compare(b, i, i + 4096, i, i + 4096) === 0) i += 4096
  while (i < n && a[i] === b[i]) i++
  return i
}

interface RequestStat {
  readonly task: number
  /** First request of its task. */
  readonly first: boolean
  readonly bytes: number
  /** Leading bytes equal to the previous request of the series (0 for the very first request). */
  readonly reusable: number
  /** System prompt + tools bytes. */
  readonly head: number
  /** The previous request is all of this one's prefix (its history was only appended to). */
  readonly extendsPrevious: boolean
}

const analyze = (requests: ReadonlyArray<Captured>): Array<RequestStat> => {
  let previous: Buffer | undefined
  let previousTask = -1
  return requests.map((c) => {
    const bytes = serialize(c)
    const messages = c.prompt.content
    const task = Number(/^Task (\d+)/.exec(userText(messages[taskIndex(messages, "Task ")]))?.[1] ?? 0)
    const firstNewline = bytes.indexOf(10)
    const head = bytes.indexOf(10, firstNewline + 1)
    const reusable = previous ? commonPrefix(previous, bytes) : 0
    const stat: RequestStat = {
      task,
      first: task !== previousTask,
      bytes: bytes.length,
      reusable,
      head: head < 0 ? bytes.length : head + 1,
      extendsPrevious: previous !== undefined && reusable === previous.length
    }
    previous = bytes
    previousTask = task
    return stat
  })
}

interface ArmSummary {
  readonly requests: number
  readonly toolCalls: number
  readonly contextReads: number
  readonly inputBytes: number
  readonly reusableBytes: number
  readonly newBytes: number
  readonly share: { readonly mean: number; readonly p10: number; readonly p50: number; readonly min: number }
  /** Compared requests that start with the whole previous request. */
  readonly extendsPrevious: number
  readonly compared: number
  readonly shareFirstOfTask: number
  readonly shareWithinTask: number
  /** New bytes per task after the first (mean). */
  readonly newBytesPerLaterTask: number
  /** Anthropic prices: cache writes 1.25×, cache reads 0.1× of base input; in base-price bytes. */
  readonly cachePricedBytes: number
  readonly headBytes: number
}

const mean = (xs: ReadonlyArray<number>) => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length)

const summarize = (stats: ReadonlyArray<RequestStat>, requests: ReadonlyArray<Captured>): ArmSummary => {
  const compared = stats.slice(1)
  const shares = compared.map((s) => s.reusable / s.bytes)
  const inputBytes = stats.reduce((a, s) => a + s.bytes, 0)
  const reusableBytes = stats.reduce((a, s) => a + s.reusable, 0)
  const later = stats.filter((s) => s.task > 1)
  // every reply is one tool call or a task's final answer; calls are seen in the requests that follow them
  const calls = new Map<string, unknown>()
  for (const c of requests) {
    for (const m of c.prompt.content) {
      if (m.role !== "assistant") continue
      for (const p of m.content) if (p.type === "tool-call") calls.set(p.id, p.params)
    }
  }
  const toolCalls = calls.size
  const contextReads = [...calls.values()].filter((params) =>
    (CONTEXT_FILES as ReadonlyArray<string>).includes((params as { path?: string }).path ?? "")
  ).length
  return {
    requests: stats.length,
    toolCalls,
    contextReads,
    inputBytes,
    reusableBytes,
    newBytes: inputBytes - reusableBytes,
    share: {
      mean: mean(shares),
      p10: percentile(shares, 0.1),
      p50: percentile(shares, 0.5),
      min: Math.min(...shares)
    },
    extendsPrevious: compared.filter((s) => s.extendsPrevious).length,
    compared: compared.length,
    shareFirstOfTask: mean(compared.filter((s) => s.first).map((s) => s.reusable / s.bytes)),
    shareWithinTask: mean(compared.filter((s) => !s.first).map((s) => s.reusable / s.bytes)),
    newBytesPerLaterTask: later.reduce((a, s) => a + s.bytes - s.reusable, 0) / Math.max(1, TASKS - 1),
    cachePricedBytes: (inputBytes - reusableBytes) * 1.25 + reusableBytes * 0.1,
    headBytes: stats[0]?.head ?? 0
  }
}

const runMemory = <A, E>(program: Effect.Effect<A, E, any>): Promise<A> =>
  Effect.runPromise(
    Session.run(program).pipe(Effect.provide(EventLog.layerMemory("bench-crew"))) as Effect.Effect<A, E>
  )

/** worker-1 serves every task; returns its requests. */
const persistentArm = async (): Promise<Array<Captured>> => {
  const captured: Array<Captured> = []
  const model = instantModel((p) => (isMember(p) ? workerReply(p) : prefixMainReply(p)), captured)
  await runMemory(
    Effect.gen(function* () {
      const crew = yield* Crew.make()
      yield* crew.spawn("worker")
      const main = yield* Agent.make({
        name: "main",
        instructions: "You lead a crew.",
        extraTools: crew.tools,
        inbox: crew.inbox
      })
      yield* main.send("Work through the feature tasks with worker-1.")
      yield* crew.run(main)
      yield* crew.shutdown
    }).pipe(Effect.scoped, Effect.provide(layerAgentServices({ languageModel: model, tools: repoTools })))
  )
  return captured.filter((c) => agentOf(c.prompt) === "worker-1")
}

/** A new agent per task, with the member's system prompt and tools; returns every request. */
const freshArm = async (memberSystem: string): Promise<Array<Captured>> => {
  const captured: Array<Captured> = []
  const model = instantModel(workerReply, captured)
  await runMemory(
    Effect.gen(function* () {
      for (let task = 1; task <= TASKS; task++) {
        const agent = yield* Agent.make({
          name: `fresh-${task}`,
          instructions: memberSystem,
          extraTools: [reportLookalike]
        })
        yield* agent.send(taskText(task))
      }
    }).pipe(Effect.provide(layerAgentServices({ languageModel: model, tools: repoTools })))
  )
  return captured
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`

const prefixPart = async () => {
  const persistent = await persistentArm()
  const system = persistent[0]?.prompt.content.find((m) => m.role === "system")
  if (!system || typeof system.content !== "string") throw new Error("worker-1 made no request")
  const fresh = await freshArm(system.content)
  const pStats = analyze(persistent)
  const fStats = analyze(fresh)
  const p = summarize(pStats, persistent)
  const f = summarize(fStats, fresh)
  const sameHead = serialize(persistent[0]!)
    .subarray(0, p.headBytes)
    .equals(serialize(fresh[0]!).subarray(0, f.headBytes))
  if (!sameHead) throw new Error("the fresh agents' system prompt and tools differ from worker-1's")

  process.stdout.write(
    `\nScript per task: read ${CONTEXT_FILES.join(", ")} (${kb(CONTEXT_BYTES)} each) unless already in the conversation,\n` +
      `grep the task's symbol, read the task's file (${kb(TASK_FILE_BYTES)}), answer in one line; one tool call per reply.\n` +
      `worker-1 (persistent): ${TASKS} tasks delegated by main; reads the context files in task 1 only.\n` +
      `fresh: a new agent per task (same system prompt and tools as worker-1, ${kb(p.headBytes)}); reads them every task.\n` +
      "Prefix share of a request = its leading bytes identical to the previous request of the same series (for a fresh\n" +
      "agent's first request: the previous task's last request, by another agent) / its bytes. Serialized as\n" +
      "system prompt, tools, messages (JSON, in order, cache markers left out). The first request of a series is not compared;\n" +
      "'extend the previous' counts requests that begin with the whole previous request, byte for byte.\n"
  )
  const shareRow = (name: string, s: ArmSummary) => [
    name,
    s.requests,
    fmtPct(s.share.mean),
    fmtPct(s.share.p10),
    fmtPct(s.share.p50),
    fmtPct(s.shareFirstOfTask),
    fmtPct(s.shareWithinTask),
    `${s.extendsPrevious}/${s.compared}`
  ]
  printTable(
    `Prefix share per request (${TASKS} tasks)`,
    ["series", "requests", "mean", "p10", "p50", "1st request of a task", "later requests", "extend the previous"],
    [shareRow("worker-1 (persistent member)", p), shareRow("fresh agent per task", f)]
  )
  const bytesRow = (name: string, s: ArmSummary) => [
    name,
    s.toolCalls,
    s.contextReads,
    kb(s.inputBytes),
    kb(s.reusableBytes),
    fmtPct(s.reusableBytes / s.inputBytes),
    kb(s.newBytes),
    kb(s.newBytesPerLaterTask),
    kb(s.cachePricedBytes)
  ]
  printTable(
    "Context-gathering tax (input bytes over all requests; new = not a prefix of the previous request)",
    [
      "series",
      "tool calls",
      "context reads",
      "input",
      "reusable",
      "reusable share",
      "new",
      "new per task 2..N",
      "cache-priced"
    ],
    [bytesRow("worker-1 (persistent member)", p), bytesRow("fresh agent per task", f)]
  )
  process.stdout.write(
    `fresh / persistent: input ${(f.inputBytes / p.inputBytes).toFixed(2)}×, new (uncacheable) ${(f.newBytes / p.newBytes).toFixed(2)}×, ` +
      `new per later task ${(f.newBytesPerLaterTask / p.newBytesPerLaterTask).toFixed(2)}×, cache-priced ${(f.cachePricedBytes / p.cachePricedBytes).toFixed(2)}×\n` +
      "cache-priced = new × 1.25 + reusable × 0.1 (Anthropic cache write / read prices relative to base input,\n" +
      "assuming every request is cached up to its last message, as MuseKit marks it; no TTL expiry, no minimum length).\n"
  )
  return { persistent: p, fresh: f }
}

// ---------------------------------------------------------------------------------------------
// Part 2: 16 members, 1,000 tool calls, durable file log
// ---------------------------------------------------------------------------------------------

const checkTool = Tools.make({
  name: "check",
  description: "A cheap check.",
  parameters: { n: Schema.Number },
  effect: "read",
  handler: ({ n }) => Effect.succeed({ n, ok: true })
})

/** Task m: `calls` calls of `check` for batch m (62 or 63, 1,000 in all). */
const batches = Array.from({ length: MEMBERS }, (_, i) => ({
  batch: i + 1,
  calls: Math.floor(TOTAL_CALLS / MEMBERS) + (i < TOTAL_CALLS % MEMBERS ? 1 : 0)
}))
const batchText = (b: { batch: number; calls: number }) => `Batch ${b.batch}: run ${b.calls} checks.`

const checkerReply = (prompt: Prompt.Prompt): Reply => {
  const messages = prompt.content
  const at = taskIndex(messages, "Batch ")
  const m = /^Batch (\d+): run (\d+) checks/.exec(userText(messages[at]))
  const batch = Number(m?.[1] ?? 0)
  const calls = Number(m?.[2] ?? 0)
  let done = 0
  for (let i = at + 1; i < messages.length; i++) if (messages[i]!.role === "tool") done++
  return done < calls
    ? Scripted.toolCalls([{ id: `b${batch}-c${done}`, name: "check", params: { n: done } }])
    : Scripted.text(`Batch ${batch}: ${calls} checks passed.`)
}

const throughputMainReply =
  (to: (batch: number) => string) =>
  (prompt: Prompt.Prompt): Reply =>
    prompt.content.some((m) => m.role === "assistant")
      ? Scripted.text("ok")
      : Scripted.toolCalls(
          batches.map((b) => ({ id: `d${b.batch}`, name: "delegate", params: { to: to(b.batch), task: batchText(b) } }))
        )

interface ThroughputResult {
  readonly ms: number
  readonly events: number
  readonly toolCalls: number
  readonly modelCalls: number
  readonly rssStartMiB: number
  readonly rssPeakMiB: number
  readonly logBytes: number
  /** CPU time of the process (user + system) during the run. */
  readonly cpuMs: number
}

const mib = (bytes: number) => bytes / 2 ** 20

/** Run a program on a fresh file log, timing it from the inside; counts the log's events after. */
const onFileLog = async (name: string, program: Effect.Effect<number, unknown, any>): Promise<ThroughputResult> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-crew-"))
  const rssStart = process.memoryUsage.rss()
  let rssPeak = rssStart
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage.rss())
  }, 20)
  try {
    const measured = Effect.gen(function* () {
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      const modelCalls = yield* program
      const ms = performance.now() - t0
      const cpu = process.cpuUsage(cpu0)
      const cpuMs = (cpu.user + cpu.system) / 1000
      const events = yield* EventLog.readAll(yield* EventLog.EventLog)
      const toolCalls = events.filter((e) => e.type === "tool.completed" && (e.data as any).tool === "check").length
      return { ms, cpuMs, events: events.length, toolCalls, modelCalls }
    })
    const r = await Effect.runPromise(
      Session.run(measured).pipe(
        Effect.provide(EventLogFile.layer({ dir, session: name, create: true }))
      ) as Effect.Effect<{ ms: number; cpuMs: number; events: number; toolCalls: number; modelCalls: number }, unknown>
    )
    rssPeak = Math.max(rssPeak, process.memoryUsage.rss())
    const logBytes = fs.statSync(path.join(dir, "sessions", `${name}.jsonl`)).size
    return { ...r, rssStartMiB: mib(rssStart), rssPeakMiB: mib(rssPeak), logBytes }
  } finally {
    clearInterval(sampler)
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const counting = (reply: (p: Prompt.Prompt) => Reply) => {
  let calls = 0
  const model = instantModel((p) => {
    calls++
    return reply(p)
  })
  return { model, calls: () => calls }
}

/** Main delegates the 16 batches (to 16 members, or all to worker-1) and runs the crew until idle. */
const crewThroughput = (members: number) => {
  const { model, calls } = counting((p) =>
    isMember(p) ? checkerReply(p) : throughputMainReply((b) => `worker-${((b - 1) % members) + 1}`)(p)
  )
  return Effect.gen(function* () {
    const crew = yield* Crew.make()
    for (let i = 0; i < members; i++) yield* crew.spawn("worker")
    const main = yield* Agent.make({
      name: "main",
      instructions: "You lead a crew.",
      extraTools: crew.tools,
      inbox: crew.inbox
    })
    yield* main.send("Run the check batches, one per worker.")
    yield* crew.run(main)
    yield* crew.shutdown
    return calls()
  }).pipe(Effect.scoped, Effect.provide(layerAgentServices({ languageModel: model, tools: [checkTool] })))
}

/** One agent, no crew: the same 16 batches, one `send` after the other. */
const soloThroughput = () => {
  const { model, calls } = counting(checkerReply)
  return Effect.gen(function* () {
    const agent = yield* Agent.make({ name: "solo", instructions: "You run checks." })
    for (const b of batches) yield* agent.send(batchText(b))
    return calls()
  }).pipe(Effect.provide(layerAgentServices({ languageModel: model, tools: [checkTool] })))
}

const CASES = [
  { key: "crew16", label: `crew: main + ${MEMBERS} members, one batch each`, program: () => crewThroughput(MEMBERS) },
  { key: "crew1", label: "crew: main + 1 member, all batches", program: () => crewThroughput(1) },
  { key: "solo", label: "single agent, no crew (16 sends in a row)", program: soloThroughput }
] as const

type CaseKey = (typeof CASES)[number]["key"]

interface CaseResult extends ThroughputResult {
  /** Wall time of every round, in the order run. */
  readonly rounds: ReadonlyArray<number>
  /** Highest peak RSS over the rounds. */
  readonly rssPeakMaxMiB: number
}

const throughputPart = async () => {
  // warm-up (module init, JIT) on a small crew, not reported
  await onFileLog("warmup", crewThroughput(2))
  const loadBefore = os.loadavg()[0]!
  const samples: Record<CaseKey, Array<ThroughputResult>> = { crew16: [], crew1: [], solo: [] }
  for (let round = 0; round < ROUNDS; round++) {
    // the order rotates, so that a busier stretch of the machine does not fall on one case only
    for (let i = 0; i < CASES.length; i++) {
      const c = CASES[(i + round) % CASES.length]!
      const r = await onFileLog(`${c.key}-${round}`, c.program())
      if (r.toolCalls !== TOTAL_CALLS) throw new Error(`${c.key}: ${r.toolCalls} tool calls, expected ${TOTAL_CALLS}`)
      samples[c.key].push(r)
    }
  }
  const pick = (key: CaseKey): CaseResult => {
    const rs = samples[key]
    const sorted = [...rs].sort((a, b) => a.ms - b.ms)
    const mid = sorted[Math.ceil(sorted.length / 2) - 1]!
    return { ...mid, rounds: rs.map((r) => Math.round(r.ms)), rssPeakMaxMiB: Math.max(...rs.map((r) => r.rssPeakMiB)) }
  }
  const loadAfter = os.loadavg()[0]!
  const results = {
    crew16: pick("crew16"),
    crew1: pick("crew1"),
    solo: pick("solo"),
    loadAverage: [loadBefore, loadAfter]
  }
  const solo = results.solo
  printTable(
    `${fmtInt(TOTAL_CALLS)} tool calls (${batches.length} batches of ${batches[batches.length - 1]!.calls}–${batches[0]!.calls}, one call per model reply), durable EventLogFile, instant model; median of ${ROUNDS} rounds`,
    [
      "case",
      "wall",
      "CPU",
      "events",
      "events/s",
      "model calls",
      "per tool call",
      "peak RSS",
      "log",
      "wall vs single agent"
    ],
    CASES.map((c) => {
      const r = results[c.key]
      return [
        c.label,
        fmtMs(r.ms),
        fmtMs(r.cpuMs),
        r.events,
        fmtInt((r.events / r.ms) * 1000),
        r.modelCalls,
        fmtMs(r.ms / r.toolCalls),
        `${r.rssPeakMaxMiB.toFixed(0)} MiB`,
        `${mib(r.logBytes).toFixed(1)} MiB`,
        `${(r.ms / solo.ms).toFixed(2)}×`
      ]
    })
  )
  process.stdout.write(
    `rounds (wall, ms): ${CASES.map((c) => `${c.key} ${results[c.key].rounds.join(" / ")}`).join("; ")}\n` +
      `crew of ${MEMBERS} vs crew of 1: ${(results.crew1.ms / results.crew16.ms).toFixed(2)}× faster. CPU = user + system time of the process during the run.\n` +
      `Peak RSS: highest process RSS sampled every 20 ms during the case's rounds (the whole process: earlier cases' heap included); ` +
      `process maxRSS so far ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB.\n` +
      `1-minute load average before / after: ${loadBefore.toFixed(1)} / ${loadAfter.toFixed(1)} on ${os.cpus().length} cores.\n`
  )
  return results
}

export const run = async (): Promise<void> => {
  const prefix = await prefixPart()
  const throughput = await throughputPart()
  const out = writeFigures("crew", {
    tasks: TASKS,
    contextFiles: CONTEXT_FILES,
    contextFileBytes: CONTEXT_BYTES,
    taskFileBytes: TASK_FILE_BYTES,
    prefix,
    prefixRatios: {
      inputFreshVsPersistent: prefix.fresh.inputBytes / prefix.persistent.inputBytes,
      newFreshVsPersistent: prefix.fresh.newBytes / prefix.persistent.newBytes,
      newPerLaterTaskFreshVsPersistent: prefix.fresh.newBytesPerLaterTask / prefix.persistent.newBytesPerLaterTask,
      cachePricedFreshVsPersistent: prefix.fresh.cachePricedBytes / prefix.persistent.cachePricedBytes
    },
    members: MEMBERS,
    toolCalls: TOTAL_CALLS,
    throughput,
    throughputRatios: {
      crew16VsSolo: throughput.crew16.ms / throughput.solo.ms,
      crew1VsSolo: throughput.crew1.ms / throughput.solo.ms,
      msPerToolCall: {
        crew16: throughput.crew16.ms / TOTAL_CALLS,
        crew1: throughput.crew1.ms / TOTAL_CALLS,
        solo: throughput.solo.ms / TOTAL_CALLS
      },
      crew16VsCrew1: throughput.crew16.ms / throughput.crew1.ms
    },
    maxRssMiB: process.resourceUsage().maxRSS / 1024
  })
  process.stdout.write(`\nfigures: ${out}\n`)
}
