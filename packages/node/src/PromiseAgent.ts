/**
 * MuseKit for code that does not use Effect: an agent with `send`, `resume`, `replay` and an
 * async iterator of its events, all Promises. It runs the same session program as `muse`
 * (`SessionRuntime`), so its sessions are durable, resumable after a crash, replay-exact, and
 * readable by `muse log` / `muse replay`.
 *
 * It lives in `@musekit/node` (subpath `@musekit/node/promise`) because a session needs the
 * durable file log and the Node workspace tools; a separate entry keeps Effect users' imports of
 * `@musekit/node` unchanged and gives Promise users one import with no Effect types to learn.
 *
 * @example
 * ```ts
 * import { createAgent, skill, tool } from "@musekit/node/promise"
 *
 * const weather = tool({
 *   name: "weather",
 *   description: "Today's weather in a city",
 *   parameters: { city: { type: "string", description: "City name" } },
 *   effect: "network",
 *   run: async ({ city }) => ({ city, sky: "clear" }) // city: string
 * })
 * const agent = createAgent({ model: "openai/gpt-4.1-mini", dir: process.cwd(), tools: [weather] })
 * const turn = await agent.send("What is the weather in Utrecht?")
 * console.log(turn.text, agent.session)
 * await agent.close()
 * // later, or after a crash: createAgent({ ..., session }).resume(); .replay({ verify: true })
 * ```
 */
import type { LanguageModel } from "@effect/ai"
import {
  type Agent,
  type Approvals,
  type Event,
  Plugin,
  type Recorder,
  type Session,
  Skill,
  Tools
} from "@musekit/core"
import { Cause, Effect, Exit, Fiber, Layer, Option, Queue, Runtime, Schema } from "effect"
import * as CodingTools from "./CodingTools.js"
import * as EventLogFile from "./EventLogFile.js"
import * as HttpClientNode from "./HttpClientNode.js"
import * as SessionRuntime from "./SessionRuntime.js"

// ---------------------------------------------------------------------------------------------
// Typed Promise tools

/** A parameter of a Promise tool: its JSON type, whether it may be left out, and what it means. */
export type Param =
  | { readonly type: "string"; readonly optional?: boolean; readonly description?: string }
  | { readonly type: "number"; readonly optional?: boolean; readonly description?: string }
  | { readonly type: "integer"; readonly optional?: boolean; readonly description?: string }
  | { readonly type: "boolean"; readonly optional?: boolean; readonly description?: string }
  | { readonly type: "string[]"; readonly optional?: boolean; readonly description?: string }

type ParamType<P extends Param> = P["type"] extends "string"
  ? string
  : P["type"] extends "number" | "integer"
    ? number
    : P["type"] extends "boolean"
      ? boolean
      : ReadonlyArray<string>

/** The arguments a tool's `run` receives, typed from its `parameters`. */
export type Args<Ps extends Readonly<Record<string, Param>>> = {
  readonly [K in keyof Ps as Ps[K]["optional"] extends true ? never : K]: ParamType<Ps[K]>
} & {
  readonly [K in keyof Ps as Ps[K]["optional"] extends true ? K : never]?: ParamType<Ps[K]> | undefined
}

export interface ToolOptions<Ps extends Readonly<Record<string, Param>>, R> {
  readonly name: string
  readonly description: string
  readonly parameters: Ps
  /** What the tool does to the world; approvals decide by it (`read` tools also re-run after a crash). */
  readonly effect: Tools.EffectClass
  /** Its result is recorded; on replay and resume the recorded result is served and `run` is not called. */
  readonly run: (args: Args<Ps>, context: { readonly agent: string; readonly root: string }) => Promise<R> | R
}

const paramSchema = (p: Param): Schema.Schema.Any => {
  const base =
    p.type === "string"
      ? Schema.String
      : p.type === "number"
        ? Schema.Number
        : p.type === "integer"
          ? Schema.Int
          : p.type === "boolean"
            ? Schema.Boolean
            : Schema.Array(Schema.String)
  const described = p.description ? base.annotations({ description: p.description }) : base
  return p.optional ? (Schema.optional(described) as unknown as Schema.Schema.Any) : described
}

/** A tool whose `run` is an async function; the model's arguments are checked and typed from `parameters`. */
export const tool = <const Ps extends Readonly<Record<string, Param>>, R>(
  options: ToolOptions<Ps, R>
): Tools.Definition<Args<Ps>, R> => {
  const fields = Object.fromEntries(Object.entries(options.parameters).map(([k, p]) => [k, paramSchema(p)]))
  return Tools.make({
    name: options.name,
    description: options.description,
    parameters: fields as Schema.Struct.Fields,
    effect: options.effect,
    handler: (args, ctx) =>
      Effect.tryPromise({
        try: async () => await options.run(args as Args<Ps>, { agent: ctx.agent, root: ctx.workspace.root }),
        catch: (e) => new Tools.ToolError({ message: e instanceof Error ? e.message : String(e) })
      })
  }) as unknown as Tools.Definition<Args<Ps>, R>
}

// ---------------------------------------------------------------------------------------------
// Promise skills

export interface SkillContext {
  /** Send a message to the agent and wait for its turn to end (recorded like any turn). */
  readonly send: (text: string) => Promise<Agent.TurnResult>
  /** Show text to the user. */
  readonly output: (text: string) => Promise<void>
}

export interface SkillOptions {
  /** `/name` (lowercase letters, digits, `-`). */
  readonly name: string
  readonly description: string
  /**
   * Runs for `/name args`. On replay and resume it runs again and its `context.send` calls are
   * served from the log, so it must act on the world only through `context` (or through tools).
   */
  readonly run: (args: string, context: SkillContext) => Promise<string | undefined>
}

/** A skill (`/name args`) written as an async function. Pass it in `createAgent({ skills })`. */
export const skill = (options: SkillOptions): Skill.Skill<string, Skill.SkillContext> =>
  Skill.make({
    name: options.name,
    description: options.description,
    run: (args) =>
      Effect.gen(function* () {
        const ctx = yield* Skill.SkillContext
        const runtime = yield* Effect.runtime<Recorder.Recorder>()
        const run = Runtime.runPromise(runtime)
        const result = yield* Effect.tryPromise({
          try: () =>
            options.run(args, {
              send: (text) => run(ctx.agent.send(text, ctx.sendOptions)),
              output: (text) => run(ctx.output(text))
            }),
          catch: (e) =>
            new Skill.SkillError({ skill: options.name, message: e instanceof Error ? e.message : String(e) })
        })
        return typeof result === "string" ? result : undefined
      }) as Effect.Effect<unknown, Skill.SkillError, Skill.SkillContext>
  })

// ---------------------------------------------------------------------------------------------
// The agent

export interface AgentOptions {
  /**
   * `provider/model` (`openai/gpt-4.1-mini`, `ollama/qwen2.5-coder:7b`, …), resolved by
   * `@musekit/models` (install it, with the provider's client). Recorded with the session.
   */
  readonly model: string
  /** Base URL, API key and environment for the model (default: `process.env`), and how it is reached. */
  readonly modelOptions?:
    | {
        readonly baseUrl?: string | undefined
        readonly apiKey?: string | undefined
        readonly env?: Readonly<Record<string, string | undefined>> | undefined
        /**
         * `node` (default): `HttpClientNode`, Node's `http`/`https` with keep-alive, less CPU per
         * call; it follows no redirects and asks for no compression. `fetch`: the runtime's `fetch`.
         */
        readonly http?: "node" | "fetch" | undefined
        /** The `user-agent` of model requests over `node` (default `musekit/<version>`; `false`: none). */
        readonly userAgent?: string | false | undefined
      }
    | undefined
  /** An @effect/ai `LanguageModel` layer instead of `model`'s provider (`model` is still recorded as the name). */
  readonly languageModel?: Layer.Layer<LanguageModel.LanguageModel> | undefined
  /** The workspace the agent works in. */
  readonly dir: string
  /** Where sessions are kept (default `$MUSE_HOME`, else `~/.muse`). */
  readonly stateDir?: string | undefined
  /** The session id: a new one by default; pass a recorded one to `resume` or `replay` it. */
  readonly session?: string | undefined
  /** The system prompt (default: muse's base instructions and the workspace's AGENTS.md). */
  readonly instructions?: string | undefined
  /** Default `auto-edit`: edits run, shell commands ask — and with no `onApproval` asking means no. */
  readonly approvalMode?: Approvals.Mode | undefined
  /** Answers approval questions (default: refuse). */
  readonly onApproval?: ((request: Approvals.Request) => Promise<boolean>) | undefined
  /** Extra tools (from `tool`, or any `Tools.Definition`), beside the coding tools. */
  readonly tools?: ReadonlyArray<Tools.Definition> | undefined
  /** `false`: only `tools`, without the built-in coding tools (read, write, edit, glob, grep, shell). */
  readonly codingTools?: boolean | undefined
  readonly plugins?: ReadonlyArray<Plugin.PluginInput> | undefined
  readonly skills?: ReadonlyArray<Skill.Skill<any, any>> | undefined
  /** Background crew members (default false). */
  readonly crew?: boolean | undefined
  readonly budget?: Agent.Budget | undefined
  /** Streamed model text, as it arrives (live only). */
  readonly onText?: ((agent: string, delta: string) => void) | undefined
}

export interface Reply {
  /** The agent's turn, for a message; `undefined` for a skill or command that made none. */
  readonly turn: Agent.TurnResult | undefined
  /** The agent's final text (the turn's, or what a skill returned). */
  readonly text: string
  /** Text a skill showed the user. */
  readonly output: ReadonlyArray<string>
}

export interface PromiseAgent {
  /** The session id (pass it to `createAgent({ session })` to resume or replay later). */
  readonly session: string
  /** Send a message (or `/skill args`); resolves when the agent is done with it. Starts the session on first use. */
  readonly send: (text: string) => Promise<Reply>
  /**
   * Continue the recorded session: replay its log (no model call, no tool side effect), settle
   * what was in flight, then stay live for `send`.
   */
  readonly resume: () => Promise<void>
  /** Re-run the recorded session with no model and no side effect; `verify` fails on the first divergence. */
  readonly replay: (options?: { readonly verify?: boolean | undefined }) => Promise<Session.ReplayReport>
  /** Every event this agent records from now on, until `close`. */
  readonly events: () => AsyncIterableIterator<Event.Envelope>
  /** End the session (waits for the running turn) and the event iterators. */
  readonly close: () => Promise<void>
}

type Input = { readonly text: string; readonly done: (reply: Reply | Error) => void }

/** The recorded config of a new session. */
const configFor = (options: AgentOptions): SessionRuntime.Config =>
  SessionRuntime.config({
    root: options.dir,
    model: options.model,
    approvalMode: options.approvalMode,
    instructions: options.instructions,
    crew: options.crew ?? false,
    budget: options.budget,
    plugins: Plugin.normalize([...(options.plugins ?? [])]).map((p) => p.name)
  })

const squash = (cause: Cause.Cause<unknown>): Error => {
  const e = Cause.squash(cause)
  return e instanceof Error ? e : new Error(String((e as { message?: unknown })?.message ?? e))
}

/** An agent for Promise code; see the module example. Nothing runs until `send`, `resume` or `replay`. */
export const createAgent = (options: AgentOptions): PromiseAgent => {
  const session = options.session ?? EventLogFile.newSessionId()
  const dir = options.stateDir
  const inputs = Effect.runSync(Queue.unbounded<Input | null>())
  const listeners = new Set<{ push: (e: Event.Envelope | null) => void }>()
  let fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  let failure: Error | undefined
  let current: { input: Input; turn: Agent.TurnResult | undefined; output: Array<string> } | undefined
  let closed = false
  /** Told when the program asks for the next input (a resume is then live). */
  let onAsk: (() => void) | undefined

  const languageModel = (): Layer.Layer<LanguageModel.LanguageModel> =>
    options.languageModel ??
    Layer.unwrapEffect(
      Effect.promise(() => import("@musekit/models")).pipe(
        Effect.map(({ Models }) => {
          const m = options.modelOptions
          const modelOptions = { env: m?.env ?? process.env, baseUrl: m?.baseUrl, apiKey: m?.apiKey }
          return (
            m?.http === "fetch"
              ? Models.layer(options.model, modelOptions)
              : Models.layerWithoutHttpClient(options.model, modelOptions).pipe(
                  Layer.provide(HttpClientNode.layerWith({ userAgent: m?.userAgent }))
                )
          ).pipe(Layer.orDie)
        })
      )
    )

  const skillsPlugin =
    options.skills && options.skills.length > 0
      ? Plugin.make({ name: "promise-skills", checkpoint: "stateless", skills: [...options.skills] })
      : undefined
  const plugins = [...(options.plugins ?? []), skillsPlugin]
  const tools = (): ReadonlyArray<Tools.Definition> | undefined =>
    options.codingTools === false
      ? [...(options.tools ?? [])]
      : options.tools && options.tools.length > 0
        ? [...CodingTools.make(), ...options.tools]
        : undefined

  /** The current input is done: the program asks for the next one (or ends). */
  const finishCurrent = () => {
    if (!current) return
    const { input, turn, output } = current
    current = undefined
    input.done({ turn, text: turn?.text ?? output[output.length - 1] ?? "", output })
  }
  const io: SessionRuntime.Io = {
    input: Effect.gen(function* () {
      finishCurrent()
      onAsk?.()
      onAsk = undefined
      const next = yield* Queue.take(inputs)
      if (next === null) return Option.none()
      current = { input: next, turn: undefined, output: [] }
      return Option.some(next.text)
    }),
    prompter: {
      ask: (request) =>
        options.onApproval
          ? Effect.promise(() => options.onApproval!(request)).pipe(
              Effect.map((allow): Approvals.Answer => ({ allow, scope: "once" }))
            )
          : Effect.succeed<Approvals.Answer>({ allow: false, scope: "once", reason: "no onApproval was given" })
    },
    onText: options.onText ? (agent, d) => Effect.sync(() => options.onText!(agent, d)) : undefined,
    onEvent: (e) =>
      Effect.sync(() => {
        for (const l of listeners) l.push(e)
      }),
    output: (text) => Effect.sync(() => void current?.output.push(text)),
    onTurn: (turn) =>
      Effect.sync(() => {
        if (current) current.turn = turn
      })
  }
  const services = (): SessionRuntime.Services => ({
    languageModel: languageModel(),
    plugins,
    tools: tools()
  })

  const launch = (program: Effect.Effect<unknown, unknown>) => {
    if (closed) throw new Error("this agent is closed: create a new one with createAgent({ session })")
    if (fiber) throw new Error(`session ${session} is already running in this agent`)
    fiber = Effect.runFork(program)
    fiber.addObserver((exit) => {
      if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) failure = squash(exit.cause)
      const err = failure ?? new Error(`session ${session} has ended`)
      current?.input.done(err)
      current = undefined
      for (const i of Effect.runSync(Queue.takeAll(inputs))) i?.done(err)
      for (const l of listeners) l.push(null)
    })
  }
  const start = () =>
    launch(
      SessionRuntime.start({
        config: configFor(options),
        session,
        io,
        services: services(),
        dir
      })
    )

  return {
    session,
    send: (text) =>
      new Promise<Reply>((resolve, reject) => {
        if (failure) return reject(failure)
        if (closed) return reject(new Error("this agent is closed"))
        try {
          if (!fiber) start()
        } catch (e) {
          return reject(e)
        }
        Effect.runSync(Queue.offer(inputs, { text, done: (r) => (r instanceof Error ? reject(r) : resolve(r)) }))
      }),
    resume: () =>
      new Promise<void>((resolve, reject) => {
        onAsk = resolve
        try {
          launch(SessionRuntime.resume({ session, io, services: services(), dir }))
        } catch (e) {
          onAsk = undefined
          return reject(e)
        }
        fiber!.addObserver(() => reject(failure ?? new Error(`session ${session} ended while resuming`)))
      }),
    replay: (replayOptions = {}) =>
      Effect.runPromise(
        SessionRuntime.replay({
          session,
          dir,
          verify: replayOptions.verify,
          plugins,
          tools: tools()
        })
      ).catch((e) => Promise.reject(e instanceof Error ? e : new Error(String(e)))),
    events: () => {
      const buffer: Array<Event.Envelope | null> = []
      let wake: (() => void) | undefined
      const l = {
        push: (e: Event.Envelope | null) => {
          buffer.push(e)
          wake?.()
        }
      }
      listeners.add(l)
      const iterator: AsyncIterableIterator<Event.Envelope> = {
        [Symbol.asyncIterator]: () => iterator,
        next: async () => {
          while (buffer.length === 0) {
            if (closed && !fiber) return { done: true, value: undefined }
            await new Promise<void>((r) => (wake = r))
            wake = undefined
          }
          const e = buffer.shift()!
          if (e === null) {
            listeners.delete(l)
            return { done: true, value: undefined }
          }
          return { done: false, value: e }
        },
        return: async () => {
          listeners.delete(l)
          return { done: true, value: undefined }
        }
      }
      return iterator
    },
    close: async () => {
      if (closed) return
      closed = true
      if (!fiber) {
        for (const l of listeners) l.push(null)
        return
      }
      Effect.runSync(Queue.offer(inputs, null))
      const exit = await Effect.runPromise(Fiber.await(fiber))
      if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) throw squash(exit.cause)
    }
  }
}
