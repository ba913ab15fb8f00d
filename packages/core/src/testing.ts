/**
 * Test kit for MuseKit and plugin authors: a scripted model built through `LanguageModel.make`, a
 * memory log, auto-answering prompters, and one layer that wires an agent for a test.
 *
 * @example
 * ```ts
 * import { Agent } from "@musekit/core"
 * import { Scripted, layerAgentTest } from "@musekit/core/testing"
 * import { Effect } from "effect"
 *
 * const script = [Scripted.toolCalls([{ name: "echo", params: { message: "hi" } }]), Scripted.text("Done.")]
 * const program = Effect.gen(function* () {
 *   const agent = yield* Agent.make({ name: "main", instructions: "test" })
 *   return yield* agent.send("say hi")
 * }).pipe(Effect.provide(layerAgentTest({ script, tools: [] })))
 * ```
 */
import { LanguageModel, type Prompt, type Response } from "@effect/ai"
import { Effect, Layer, Option, Stream } from "effect"
import * as Approvals from "./Approvals.js"
import * as Event from "./Event.js"
import * as EventLog from "./EventLog.js"
import * as Model from "./Model.js"
import * as Plugin from "./Plugin.js"
import * as Recorder from "./Recorder.js"
import * as Tools from "./Tools.js"
import * as Workspace from "./Workspace.js"

/** One scripted model reply: parts, or a function of the prompt the model received. */
export type Turn =
  | ReadonlyArray<Response.PartEncoded>
  | ((prompt: Prompt.Prompt, call: number) => ReadonlyArray<Response.PartEncoded>)

const usage = (input = 100, output = 20) => ({
  inputTokens: input,
  outputTokens: output,
  totalTokens: input + output
})

/** Builders for scripted replies. */
export const Scripted = {
  text: (text: string, tokens?: { input?: number; output?: number }): ReadonlyArray<Response.PartEncoded> => [
    { type: "text", text },
    { type: "finish", reason: "stop", usage: usage(tokens?.input, tokens?.output) }
  ],
  toolCalls: (
    calls: ReadonlyArray<{ readonly id?: string; readonly name: string; readonly params: unknown }>,
    options: { readonly text?: string; readonly input?: number; readonly output?: number } = {}
  ): ReadonlyArray<Response.PartEncoded> => [
    ...(options.text ? [{ type: "text" as const, text: options.text }] : []),
    ...calls.map((c, i) => ({
      type: "tool-call" as const,
      id: c.id ?? `call_${i + 1}`,
      name: c.name,
      params: c.params,
      providerExecuted: false
    })),
    { type: "finish", reason: "tool-calls", usage: usage(options.input, options.output) }
  ]
}

/** What a routed script handler sees of one request. */
export interface RouteContext {
  readonly agent: string
  readonly prompt: Prompt.Prompt
  /**
   * Replies of the agent so far (0 on its first request). Counted from the tool-call ids of the
   * newest reply when it has some (routed replies mark the default ids `call_<n>`), so a compaction
   * that folded earlier replies away does not send the script back to an earlier turn.
   */
  readonly turn: number
  /** Text of the newest user message. */
  readonly lastUser: string
  /** Results of the newest tool message, if the newest message is one. */
  readonly lastResults: ReadonlyArray<{ readonly name: string; readonly isFailure: boolean; readonly result: unknown }>
}

/** User inputs for a scripted session: each call takes the next text, then `None` (the session ends). */
export const inputs = (texts: ReadonlyArray<string>): Effect.Effect<Option.Option<string>> => {
  const queue = [...texts]
  return Effect.sync(() => (queue.length > 0 ? Option.some(queue.shift()!) : Option.none()))
}

/**
 * Events as a replay compares them, one line each: seq, agent, parent, type and data without its
 * observations (`data.observed`); times left out. Two runs that should match compare equal.
 */
export const comparableEvents = (events: ReadonlyArray<Event.Envelope>): Array<string> =>
  events.map((e) => {
    const data = e.data as Record<string, unknown> | null
    const { [Recorder.OBSERVED]: _, ...rest } = typeof data === "object" && data !== null ? data : { value: data }
    return `${e.seq} ${e.agent} ${e.parent} ${e.type} ${Event.canonicalJson(rest)}`
  })

/** The agent a request is for: crew members say "You are <name>, …" in their system prompt; else `main`. */
export const agentOf = (prompt: Prompt.Prompt): string => {
  const system = prompt.content.find((m) => m.role === "system")
  const text = system && typeof system.content === "string" ? system.content : ""
  return /You are ([\w-]+), a persistent member/.exec(text)?.[1] ?? "main"
}

/** The end of the tool-call ids of a routed reply: `-turn<n>`. */
const TURN_MARK = /-turn(\d+)$/

/** Replies so far: the assistant messages, or one more than the newest reply's mark if that is more. */
const turnOf = (messages: Prompt.Prompt["content"]): number => {
  let visible = 0
  let marked = 0
  for (const m of messages) {
    if (m.role !== "assistant") continue
    visible++
    for (const p of m.content) {
      const hit = p.type === "tool-call" ? TURN_MARK.exec(p.id) : null
      if (hit) marked = Math.max(marked, Number(hit[1]) + 1)
    }
  }
  return Math.max(visible, marked)
}

/**
 * A stateless script for several agents: each request is routed by agent (exact name, then role
 * prefix like `worker`, then `*`) to a handler that answers from the prompt alone, so a replayed or
 * resumed run gets the same answers. Default tool-call ids (`call_<n>`) get `-turn<n>` appended.
 */
export const routed =
  (handlers: Record<string, (ctx: RouteContext) => ReadonlyArray<Response.PartEncoded>>): Turn =>
  (prompt) => {
    const agent = agentOf(prompt)
    const handler = handlers[agent] ?? handlers[agent.replace(/-\d+$/, "")] ?? handlers["*"]
    if (!handler) throw new Error(`no scripted handler for agent ${agent}`)
    const messages = prompt.content
    const users = messages.filter((m) => m.role === "user")
    const lastUserMsg = users[users.length - 1]
    const lastUser = lastUserMsg
      ? lastUserMsg.content
          .filter((p) => p.type === "text")
          .map((p) => (p as any).text)
          .join("\n")
      : ""
    const last = messages[messages.length - 1]
    const lastResults =
      last?.role === "tool" ? last.content.map((p) => ({ name: p.name, isFailure: p.isFailure, result: p.result })) : []
    const turn = turnOf(messages)
    // default ids (`call_<n>`, from `Scripted.toolCalls`) carry the turn; ids a script chose stay as they are
    return handler({ agent, prompt, turn, lastUser, lastResults }).map((p) =>
      p.type === "tool-call" && /^call_\d+$/.test(p.id) ? { ...p, id: `${p.id}-turn${turn}` } : p
    )
  }

export interface ScriptedModel {
  readonly layer: Layer.Layer<LanguageModel.LanguageModel>
  /** Every prompt the model received, in order. */
  readonly prompts: Array<Prompt.Prompt>
  /** How many calls were made. */
  readonly calls: () => number
}

/**
 * A language model that answers from a script. When the script runs out it repeats the last turn
 * (or, with `strict`, fails the call so a test notices).
 */
export const scriptedModel = (
  turns: ReadonlyArray<Turn>,
  options: { readonly strict?: boolean } = {}
): ScriptedModel => {
  const prompts: Array<Prompt.Prompt> = []
  let cursor = 0
  const next = (prompt: Prompt.Prompt): ReadonlyArray<Response.PartEncoded> => {
    prompts.push(prompt)
    const n = cursor++
    if (n >= turns.length && options.strict)
      throw new Error(`the script has ${turns.length} turns; call ${n + 1} is one too many`)
    const t = turns[Math.min(n, turns.length - 1)]!
    return typeof t === "function" ? t(prompt, n) : t
  }
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (opts) => Effect.sync(() => [...next(opts.prompt)]),
      streamText: (opts) =>
        Stream.suspend(() =>
          Stream.fromIterable(
            next(opts.prompt).flatMap(
              (p): Array<Response.StreamPartEncoded> =>
                p.type === "text"
                  ? [
                      { type: "text-start", id: "t" },
                      ...p.text.split(/(?<= )/).map((delta) => ({ type: "text-delta" as const, id: "t", delta })),
                      { type: "text-end", id: "t" }
                    ]
                  : [p as Response.StreamPartEncoded]
            )
          )
        )
    })
  )
  return { layer, prompts, calls: () => cursor }
}

/** A prompter that answers every question with `allow` (and records the questions). */
export const autoPrompter = (
  answer: Approvals.Answer = { allow: true, scope: "once" }
): { readonly layer: Layer.Layer<Approvals.Prompter>; readonly asked: Array<Approvals.Request> } => {
  const asked: Array<Approvals.Request> = []
  return {
    asked,
    layer: Layer.succeed(Approvals.Prompter, {
      ask: (request) =>
        Effect.sync(() => {
          asked.push(request)
          return answer
        })
    })
  }
}

export interface AgentTestOptions {
  readonly script?: ReadonlyArray<Turn> | undefined
  /** Use this language model instead of a script. */
  readonly languageModel?: Layer.Layer<LanguageModel.LanguageModel> | undefined
  readonly tools?: ReadonlyArray<Tools.Definition> | undefined
  readonly approvals?: Approvals.Policy | undefined
  readonly prompter?: Layer.Layer<Approvals.Prompter> | undefined
  readonly workspace?: Layer.Layer<Workspace.Workspace> | undefined
  readonly plugins?: ReadonlyArray<Plugin.PluginInput> | undefined
  readonly log?: Layer.Layer<EventLog.EventLog> | undefined
  readonly modelName?: string | undefined
  /** The model's context window: tool results are sized to a tenth of it (default: unknown, sent whole). */
  readonly contextWindow?: number | undefined
}

/**
 * Everything `Agent.make` needs except the `Recorder`: the scripted model, the tools, approvals in
 * `auto` mode unless told otherwise, an allowing prompter, a lexical workspace at `/workspace`,
 * and the plugins. Provide it inside a program given to `Session.run`, `replay` or `resume`.
 */
export const layerAgentServices = (options: AgentTestOptions = {}) => {
  const lm = options.languageModel ?? scriptedModel(options.script ?? []).layer
  return Layer.mergeAll(
    Model.layer(options.modelName ?? "scripted/test", { contextWindow: options.contextWindow }).pipe(Layer.provide(lm)),
    Tools.layer(options.tools ?? []),
    Approvals.layer(options.approvals ?? { mode: "auto" }),
    options.prompter ?? autoPrompter().layer,
    options.workspace ?? Workspace.layerLexical("/workspace"),
    Plugin.layer(options.plugins ?? [])
  )
}

/** `layerAgentServices` plus a live recorder over a memory log (or the log given). */
export const layerAgentTest = (options: AgentTestOptions = {}) => {
  const log = options.log ?? EventLog.layerMemory("test")
  const recorder = Recorder.layerLive.pipe(Layer.provideMerge(log))
  return layerAgentServices(options).pipe(Layer.provideMerge(recorder))
}

export * as EventLogConformance from "./EventLogConformance.js"
export { EventLog }
