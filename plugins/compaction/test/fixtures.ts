/**
 * A long scripted coding session for the compaction tests and the benchmark: a model that keeps
 * calling an `inspect` tool (a few KB of output per call) and now and then `write_file`, facts
 * planted early (in the first user message, in a `<pinned>` inbox message and in a plan message
 * pinned through `options.muse.pin`), and a compactor that answers summary requests.
 */
import { AiError, LanguageModel, type Prompt, type Response } from "@effect/ai"
import { Agent, Event, EventLog, Plugin, Session, Tools } from "@musekit/core"
import { layerAgentServices, Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import { CompactionPlugin } from "../src/index.js"

export const FACT_ALPHA = "FACT-ALPHA: releases are cut from the branch release/7.4; never push to main."
export const FACT_BETA = "FACT-BETA: the staging database is read-only, so migrations go through ops."
export const FACT_GAMMA = "FACT-GAMMA: plan — 1. inspect every module, 2. fix the flaky parser test, 3. update docs."

export const TASK = `Inspect the modules of this repository one by one and report anything odd. ${FACT_ALPHA}`
export const BETA_MESSAGE = `<pinned>${FACT_BETA}</pinned>`
export const PLAN_TEXT = FACT_GAMMA
export const FACTS = [FACT_ALPHA, FACT_BETA, FACT_GAMMA] as const

const WORDS = [
  "parser",
  "token",
  "buffer",
  "cache",
  "render",
  "config",
  "schema",
  "stream",
  "worker",
  "queue",
  "index",
  "layout",
  "handler",
  "router",
  "client",
  "session"
]

/** A deterministic, code-like tool output of about `bytes` characters. */
export const observation = (step: number, bytes = 2_400): string => {
  let seed = (step * 2654435761) >>> 0
  const next = () => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
    return seed
  }
  const lines: Array<string> = [`== module-${step}.ts ==`]
  let size = lines[0]!.length
  let line = 1
  while (size < bytes) {
    const a = WORDS[next() % WORDS.length]!
    const b = WORDS[next() % WORDS.length]!
    const text = `src/module-${step}.ts:${line}: export const ${a}${line} = create${b[0]!.toUpperCase()}${b.slice(1)}(${next() % 1000}, "${a}-${b}")`
    lines.push(text)
    size += text.length + 1
    line += 1
  }
  return lines.join("\n")
}

/** Content written by the `write_file` calls (bulky arguments, masked like outputs). */
export const fileContent = (step: number) => observation(step + 100_000, 1_600)

export const writtenPath = (step: number) => `src/fix-${step}.ts`

export const makeTools = (written: Array<string> = []) => [
  Tools.make({
    name: "inspect",
    description: "Show a module",
    parameters: { step: Schema.Number },
    effect: "read",
    handler: ({ step }) => Effect.succeed(observation(step))
  }),
  Tools.make({
    name: "write_file",
    description: "Write a file",
    parameters: { path: Schema.String, content: Schema.String },
    effect: "write",
    paths: ({ path }) => [path],
    handler: ({ path }) =>
      Effect.sync(() => {
        written.push(path)
        return { ok: true }
      })
  })
]

const systemOf = (prompt: Prompt.Prompt): string => {
  const first = prompt.content[0]
  return first?.role === "system" ? first.content : ""
}

/** Whether a request is the compactor's (recognised by its system prompt, as the brief says). */
export const isSummaryRequest = (prompt: Prompt.Prompt) => systemOf(prompt) === CompactionPlugin.summaryPrompt

const userText = (prompt: Prompt.Prompt) =>
  prompt.content
    .filter((m) => m.role === "user")
    .flatMap((m) => m.content.map((p) => (p.type === "text" ? p.text : "")))
    .join("\n")

/** The compactor's reply: a structured summary naming the last step it saw (files left to the plugin). */
export const summaryReply = (prompt: Prompt.Prompt): ReadonlyArray<Response.PartEncoded> => {
  const text = userText(prompt)
  const steps = [...text.matchAll(/inspect \{"step":(\d+)\}/g)].map((m) => Number(m[1]))
  const last = steps.length > 0 ? Math.max(...steps) : 0
  return Scripted.text(
    [
      "## Goal",
      "Inspect every module of the repository and report anything odd.",
      "## Progress",
      `- Inspected modules up to module-${last}.ts; nothing odd so far.`,
      "## Decisions",
      "- Inspect modules in order, one per step.",
      "## Constraints from the user",
      "- Report anything odd.",
      "## Files touched",
      "none",
      "## Open todos",
      `- [in progress] inspect module-${last + 1}.ts and onwards`,
      "## Last errors",
      "none"
    ].join("\n")
  )
}

export interface LongRun {
  /** Tool calls to make before answering with text. */
  readonly toolCalls: number
  /** Every this many steps the model also writes a file. */
  readonly writeEvery?: number | undefined
  /** Reply to compactor requests (default `summaryReply`). */
  readonly summarize?: ((prompt: Prompt.Prompt) => ReadonlyArray<Response.PartEncoded>) | undefined
}

/** The agent's side of the script: keeps calling tools until `toolCalls` were made. */
export const longRunTurn = (run: LongRun) => {
  let calls = 0
  let step = 0
  const writeEvery = run.writeEvery ?? 25
  return (prompt: Prompt.Prompt): ReadonlyArray<Response.PartEncoded> => {
    if (isSummaryRequest(prompt)) return (run.summarize ?? summaryReply)(prompt)
    if (calls >= run.toolCalls) return Scripted.text(`Inspected ${step} modules; nothing odd.`)
    step += 1
    const list: Array<{ id: string; name: string; params: unknown }> = [
      { id: `c${step}`, name: "inspect", params: { step } }
    ]
    if (step % writeEvery === 0 && calls + 1 < run.toolCalls) {
      list.push({ id: `w${step}`, name: "write_file", params: { path: writtenPath(step), content: fileContent(step) } })
    }
    calls += list.length
    return Scripted.toolCalls(list)
  }
}

/** A skill-like plugin that pins a plan message right after the first user message, once. */
export const planPlugin = Plugin.make({
  name: "plan",
  hooks: {
    transformContext: {
      order: "pre",
      handler: (input) =>
        Effect.succeed(
          input.messages.length === 1 && input.messages[0]!.role === "user"
            ? [
                ...input.messages,
                {
                  role: "user" as const,
                  content: [{ type: "text" as const, text: PLAN_TEXT }],
                  options: { muse: { pin: true } }
                }
              ]
            : input.messages
        )
    }
  }
})

/** An inbox that delivers the `<pinned>` message at the agent's third model call. */
const betaInbox = (): Agent.Inbox => {
  let polls = 0
  return {
    take: Effect.sync(() => {
      polls += 1
      return polls === 3 ? Option.some({ id: "beta", from: "user", text: BETA_MESSAGE }) : Option.none()
    })
  }
}

export interface ProgramOptions {
  readonly languageModel: Layer.Layer<any>
  readonly plugins: ReadonlyArray<Plugin.PluginInput>
  readonly written?: Array<string> | undefined
  readonly instructions?: string | undefined
}

/** The session program: one agent, one task. */
export const program = (options: ProgramOptions) =>
  Effect.gen(function* () {
    const agent = yield* Agent.make({
      name: "main",
      instructions: options.instructions ?? "You are a careful coding agent. Use the tools.",
      inbox: betaInbox()
    })
    return yield* agent.send(TASK)
  }).pipe(
    Effect.provide(
      layerAgentServices({
        languageModel: options.languageModel,
        tools: makeTools(options.written),
        plugins: options.plugins
      })
    )
  )

/** Run a program live on a memory log; the events and the blob reader come back. */
export const runLive = <A, E>(p: Effect.Effect<A, E, any>) =>
  Effect.gen(function* () {
    const result = yield* Session.run(p)
    const log = yield* EventLog.EventLog
    const events = yield* EventLog.readAll(log)
    return { result, events, getBlob: log.getBlob }
  }).pipe(Effect.provide(EventLog.layerMemory("compaction-test"))) as Effect.Effect<
    {
      result: A
      events: ReadonlyArray<Event.Envelope>
      getBlob: (hash: string) => Effect.Effect<Uint8Array, EventLog.EventLogError>
    },
    E
  >

export const longRunModel = (run: LongRun) => scriptedModel([longRunTurn(run)])

/** Text of every message of a prompt (for fact probes). */
export const promptText = (prompt: Prompt.Prompt): string =>
  prompt.content
    .map((m) =>
      typeof m.content === "string"
        ? m.content
        : m.content
            .map((p: any) =>
              p.type === "text"
                ? p.text
                : p.type === "tool-result"
                  ? JSON.stringify(p.result)
                  : p.type === "tool-call"
                    ? JSON.stringify(p.params)
                    : ""
            )
            .join("\n")
    )
    .join("\n")

/**
 * Structural problems of a prompt: a tool call without its result right after it, or a result
 * without its call. An empty list means the prompt is valid.
 */
export const structureProblems = (prompt: Prompt.Prompt): Array<string> => {
  const problems: Array<string> = []
  const messages = prompt.content
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    if (m.role === "assistant") {
      const calls = m.content.filter((p) => p.type === "tool-call").map((p: any) => p.id as string)
      const answered = new Set<string>()
      for (let j = i + 1; j < messages.length && messages[j]!.role === "tool"; j++) {
        for (const p of (messages[j] as Prompt.ToolMessage).content) answered.add(p.id)
      }
      for (const id of calls) if (!answered.has(id)) problems.push(`call ${id} at message ${i} has no result`)
    }
    if (m.role === "tool") {
      let k = i - 1
      while (k >= 0 && messages[k]!.role === "tool") k--
      const prev = messages[k]
      const calls = new Set(
        prev?.role === "assistant" ? prev.content.filter((p) => p.type === "tool-call").map((p: any) => p.id) : []
      )
      for (const p of m.content) if (!calls.has(p.id)) problems.push(`result ${p.id} at message ${i} has no call`)
    }
  }
  return problems
}

export const stripObserved = (events: ReadonlyArray<Event.Envelope>) =>
  events.map((e) => {
    const data = e.data as any
    if (data && typeof data === "object" && "observed" in data) {
      const { observed: _, ...rest } = data
      return Event.encodeLine({ ...e, at: 0, data: rest })
    }
    return Event.encodeLine({ ...e, at: 0 })
  })

/** A reply, or a provider error with this message. */
export type Answer = ReadonlyArray<Response.PartEncoded> | { readonly error: string }

const toStream = (parts: ReadonlyArray<Response.PartEncoded>): Array<Response.StreamPartEncoded> =>
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

/**
 * A language model built with `LanguageModel.make` that can also fail like a provider does
 * (e.g. "context_length_exceeded"). Every prompt it receives is kept.
 */
export const failingModel = (respond: (prompt: Prompt.Prompt) => Answer) => {
  const prompts: Array<Prompt.Prompt> = []
  const answer = (prompt: Prompt.Prompt) => {
    prompts.push(prompt)
    const a = respond(prompt)
    return "error" in a
      ? Effect.fail(new AiError.UnknownError({ module: "FakeProvider", method: "streamText", description: a.error }))
      : Effect.succeed(a)
  }
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (opts) => Effect.map(answer(opts.prompt), (parts) => [...parts]),
      streamText: (opts) =>
        Stream.unwrap(
          Effect.suspend(() => Effect.map(answer(opts.prompt), (parts) => Stream.fromIterable(toStream(parts))))
        )
    })
  )
  return { layer, prompts }
}
