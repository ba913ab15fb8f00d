/**
 * Plugins: one value that brings a layer, hooks, tools, skills and crew roles.
 *
 * `Plugin.make({ name, ... })` builds one; `Plugin.layer([...])` composes many: the list is
 * flattened, falsy entries are dropped, plugins are deduped by name (the last one wins, so a later
 * entry reconfigures an earlier one), their layers are merged and their hooks, tools, skills and
 * roles are registered for the layer's lifetime. Each hook point has a declared combination:
 *
 * | hook               | combination                        |
 * |--------------------|------------------------------------|
 * | `transformPrompt`  | sequential transform               |
 * | `transformContext` | sequential transform               |
 * | `beforeToolCall`   | first result wins (block or rewrite) |
 * | `afterToolCall`    | sequential transform               |
 * | `onSpawn`          | first result wins (a workspace)    |
 * | `onRestore`        | first result wins (the same workspace, for a member back from a checkpoint) |
 * | `onResume`         | sequential, in plugin order (before any crew member comes back) |
 * | `onEvent`          | parallel observers                 |
 *
 * A hook is a function or `{ handler, order: "pre" | "post" }`. It may use what its plugin's `layer`
 * provides and the session's `Recorder` (`HookContext`); `make` rejects a hook that needs anything
 * else at compile time. The types a plugin implements live in `Contract` (beneath `Agent` and
 * `Crew`) and are re-exported here under the same names.
 *
 * @example
 * ```ts
 * import { Plugin, Tools } from "@musekit/core"
 * import { Effect, Schema } from "effect"
 *
 * const shout = Plugin.make({
 *   name: "shout",
 *   tools: [Tools.make({ name: "shout", description: "Upper-case text", parameters: { text: Schema.String },
 *     effect: "read", handler: ({ text }) => Effect.succeed(text.toUpperCase()) })],
 *   hooks: { afterToolCall: (call) => Effect.succeed(call.result) }
 * })
 * const layer = Plugin.layer([shout, false, undefined])
 * ```
 */
import type { Prompt } from "@effect/ai"
import { Context, Effect, Layer } from "effect"
import type {
  BeforeToolCall,
  ContextInput,
  Hook,
  HookFn,
  Hooks,
  Plugin,
  PluginOptions,
  PromptInput,
  RestoreInfo,
  ResumeInfo,
  Role,
  Skill,
  SpawnFailed,
  SpawnInfo,
  SpawnResult,
  ToolCallInfo,
  ToolResult
} from "./Contract.js"
import type * as Event from "./Event.js"
import type * as Recorder from "./Recorder.js"
import * as Tools from "./Tools.js"

export type {
  Attachment,
  BeforeToolCall,
  Checkpointing,
  ContextInput,
  Hook,
  HookContext,
  HookFn,
  Hooks,
  Plugin,
  PluginOptions,
  PromptInput,
  RestoreInfo,
  ResumeInfo,
  Role,
  SpawnInfo,
  SpawnResult,
  ToolCallInfo,
  ToolResult
} from "./Contract.js"
export { SpawnFailed } from "./Contract.js"

/**
 * Make a plugin. Its hooks may use what its `layer` provides (and `HookContext`); a hook that needs
 * anything else is a type error here, not a missing service at run time.
 */
export const make = <ROut = never, E = never>(options: PluginOptions<ROut, E>): Plugin => {
  if (!options.name) throw new Error("a plugin needs a name")
  // the registry runs the hooks with the layer's services: from here on they are not named
  return options as Plugin
}

export type PluginInput = Plugin | false | null | undefined | ReadonlyArray<PluginInput>

/** Flatten, drop falsy entries, dedupe by name keeping the last occurrence's position and value. */
export const normalize = (plugins: ReadonlyArray<PluginInput>): ReadonlyArray<Plugin> => {
  const flat: Array<Plugin> = []
  const walk = (p: PluginInput) => {
    if (!p) return
    if (Array.isArray(p)) for (const q of p) walk(q)
    else flat.push(p as Plugin)
  }
  for (const p of plugins) walk(p)
  const last = new Map<string, number>()
  for (const [i, p] of flat.entries()) last.set(p.name, i)
  return flat.filter((p, i) => last.get(p.name) === i)
}

// ---------------------------------------------------------------------------------------------
// The registry the agent loop runs hooks from
// ---------------------------------------------------------------------------------------------

export interface Service {
  readonly plugins: ReadonlyArray<Plugin>
  readonly tools: ReadonlyArray<Tools.Definition>
  readonly skills: ReadonlyArray<Skill>
  readonly roles: ReadonlyArray<Role>
  readonly transformPrompt: (input: PromptInput) => Effect.Effect<PromptInput>
  readonly transformContext: (
    input: ContextInput
  ) => Effect.Effect<ReadonlyArray<Prompt.MessageEncoded>, Recorder.RecorderError>
  readonly beforeToolCall: (input: ToolCallInfo) => Effect.Effect<BeforeToolCall | undefined>
  readonly afterToolCall: (input: ToolCallInfo & { readonly result: ToolResult }) => Effect.Effect<ToolResult>
  readonly onSpawn: (input: SpawnInfo) => Effect.Effect<SpawnResult | undefined, Recorder.RecorderError | SpawnFailed>
  readonly onRestore: (input: RestoreInfo) => Effect.Effect<SpawnResult | undefined>
  readonly onResume: (input: ResumeInfo) => Effect.Effect<void>
  /** Whether some plugin gives back the workspaces its `onSpawn` gave (`onRestore`). */
  readonly restoresSpawns: boolean
  readonly onEvent: (event: Event.Envelope) => Effect.Effect<void>
  /** Every plugin's state by name, or `undefined` when one of them cannot be saved (now or at all). */
  readonly save: Effect.Effect<Record<string, unknown> | undefined, never, Recorder.Recorder>
  /** Put back what `save` returned (plugins missing from `states` are left as they are). */
  readonly restore: (states: Record<string, unknown>) => Effect.Effect<void, never, Recorder.Recorder>
}

export class Plugins extends Context.Tag("@musekit/core/Plugins")<Plugins, Service>() {}

const orderedHandlers = <I, O, E = never>(
  plugins: ReadonlyArray<Plugin>,
  pick: (h: Hooks) => Hook<I, O, E> | undefined
) => {
  const pre: Array<HookFn<I, O, E>> = []
  const normal: Array<HookFn<I, O, E>> = []
  const post: Array<HookFn<I, O, E>> = []
  for (const p of plugins) {
    const h = p.hooks ? pick(p.hooks) : undefined
    if (!h) continue
    if (typeof h === "function") normal.push(h)
    else (h.order === "pre" ? pre : h.order === "post" ? post : normal).push(h.handler)
  }
  return [...pre, ...normal, ...post]
}

/**
 * Build the registry: hooks (and plugin tools) run with the caller's services and, on top, those of
 * the context the registry is built in (where the plugins' layers are provided).
 */
export const makeRegistry = (plugins: ReadonlyArray<Plugin>): Effect.Effect<Service> =>
  Effect.gen(function* () {
    const ctx = yield* Effect.context<never>()
    // the caller's services with the plugins' on top; merged once per caller context (a loop calls
    // hooks from the same context step after step)
    const merged = new WeakMap<Context.Context<never>, Context.Context<never>>()
    const run = <O, E, R>(eff: Effect.Effect<O, E, R>): Effect.Effect<O, E> =>
      Effect.contextWithEffect((caller: Context.Context<never>) => {
        let both = merged.get(caller)
        if (both === undefined) {
          both = Context.merge(caller, ctx)
          merged.set(caller, both)
        }
        // what `R` names is in `both`: `Plugin.make` admits only the plugin layer's services and
        // `HookContext`, which the calling agent or crew has
        return Effect.mapInputContext(eff, () => both as Context.Context<R>)
      })
    // hook points without handlers cost nothing (they run at every step of every agent)
    const sequential =
      <I>(fns: ReadonlyArray<HookFn<I, I>>) =>
      (input: I): Effect.Effect<I> =>
        fns.length === 0 ? Effect.succeed(input) : Effect.reduce(fns, input, (acc, f) => run(f(acc)))
    const none = Effect.succeed(undefined)
    const firstWins =
      <I, O, E = never>(fns: ReadonlyArray<HookFn<I, O | undefined, E>>) =>
      (input: I): Effect.Effect<O | undefined, E> =>
        fns.length === 0
          ? none
          : Effect.gen(function* () {
              for (const f of fns) {
                const r = yield* run(f(input))
                if (r !== undefined) return r
              }
              return undefined
            })
    const tp = orderedHandlers(plugins, (h) => h.transformPrompt)
    const tc = orderedHandlers(plugins, (h) => h.transformContext)
    const before = orderedHandlers(plugins, (h) => h.beforeToolCall)
    const after = orderedHandlers(plugins, (h) => h.afterToolCall)
    const spawn = orderedHandlers(plugins, (h) => h.onSpawn)
    const restoreSpawn = orderedHandlers(plugins, (h) => h.onRestore)
    const resume = orderedHandlers(plugins, (h) => h.onResume)
    const observers = orderedHandlers(plugins, (h) => h.onEvent)
    return {
      plugins,
      // a plugin's tools run with the services of the plugins' layers, like its hooks
      tools: plugins
        .flatMap((p) => p.tools ?? [])
        .map(
          (t): Tools.Definition => ({
            ...t,
            handler: (params, c) => run(t.handler(params, c)),
            preview: t.preview && ((params, c) => run(t.preview!(params, c))),
            observe: t.observe && ((params, c) => run(t.observe!(params, c))),
            settle: t.settle && ((params, c) => run(t.settle!(params, c)))
          })
        ),
      skills: plugins.flatMap((p) => p.skills ?? []),
      roles: plugins.flatMap((p) => p.roles ?? []),
      transformPrompt: sequential(tp),
      transformContext: (input) =>
        tc.length === 0
          ? Effect.succeed(input.messages)
          : Effect.map(
              Effect.reduce(tc, input, (acc, f) => Effect.map(run(f(acc)), (messages) => ({ ...acc, messages }))),
              (r) => r.messages
            ),
      beforeToolCall: firstWins(before),
      afterToolCall: (input) =>
        after.length === 0
          ? Effect.succeed(input.result)
          : Effect.reduce(after, input.result, (result, f) => run(f({ ...input, result }))),
      onSpawn: firstWins(spawn),
      onRestore: firstWins(restoreSpawn),
      onResume: (input) =>
        resume.length === 0 ? Effect.void : Effect.forEach(resume, (f) => run(f(input)), { discard: true }),
      restoresSpawns: restoreSpawn.length > 0,
      onEvent: (event) =>
        observers.length === 0
          ? Effect.void
          : Effect.asVoid(Effect.forEach(observers, (f) => run(f(event)), { concurrency: "unbounded", discard: true })),
      // with the same services as the hooks, so a plugin keyed by the session's recorder sees the same one
      save: run(saveAll(plugins)),
      restore: (states) => run(restoreAll(plugins)(states))
    } satisfies Service
  })

const saveAll = (
  plugins: ReadonlyArray<Plugin>
): Effect.Effect<Record<string, unknown> | undefined, never, Recorder.Recorder> =>
  Effect.gen(function* () {
    const out: Record<string, unknown> = {}
    for (const p of plugins) {
      if (p.checkpoint === "stateless") continue
      if (p.checkpoint === undefined) return undefined
      const state: unknown = yield* p.checkpoint.save
      if (state === undefined) return undefined
      out[p.name] = state
    }
    return out
  })

const restoreAll =
  (plugins: ReadonlyArray<Plugin>) =>
  (states: Record<string, unknown>): Effect.Effect<void, never, Recorder.Recorder> =>
    Effect.forEach(
      plugins,
      (p) =>
        p.checkpoint !== undefined && p.checkpoint !== "stateless" && p.name in states
          ? p.checkpoint.restore(states[p.name])
          : Effect.void,
      { discard: true }
    )

export const empty: Service = {
  plugins: [],
  tools: [],
  skills: [],
  roles: [],
  transformPrompt: Effect.succeed,
  transformContext: (i) => Effect.succeed(i.messages),
  beforeToolCall: () => Effect.succeed(undefined),
  afterToolCall: (i) => Effect.succeed(i.result),
  onSpawn: () => Effect.succeed(undefined),
  onRestore: () => Effect.succeed(undefined),
  onResume: () => Effect.void,
  restoresSpawns: false,
  onEvent: () => Effect.void,
  save: Effect.succeed({}),
  restore: () => Effect.void
}

export const layerEmpty: Layer.Layer<Plugins> = Layer.succeed(Plugins, empty)

/**
 * Compose plugins into one layer: their own layers merged, and the `Plugins` registry whose hooks
 * run with those layers' services. Hooks are gone when the layer's scope closes. A plugin's own
 * layer is self-contained (it needs nothing); a failure building it is a defect naming nothing
 * more specific.
 */
export const layer = (plugins: ReadonlyArray<PluginInput>): Layer.Layer<Plugins> => {
  const list = normalize(plugins)
  const provided = list.map((p) => p.layer).filter((l) => l !== undefined)
  const registry = Layer.scoped(Plugins, makeRegistry(list))
  if (provided.length === 0) return registry
  const merged = Layer.mergeAll(provided[0]!, ...provided.slice(1))
  return Layer.orDie(Layer.provideMerge(registry, merged))
}

// ---------------------------------------------------------------------------------------------
// Promise adapter for authors who do not use Effect
// ---------------------------------------------------------------------------------------------

type Promised<F> = F extends HookFn<infer I, infer O> ? (input: I) => Promise<O> | O : never

export interface PromiseHooks {
  readonly transformPrompt?: Promised<HookFn<PromptInput, PromptInput>> | undefined
  readonly transformContext?: Promised<HookFn<ContextInput, ReadonlyArray<Prompt.MessageEncoded>>> | undefined
  readonly beforeToolCall?: Promised<HookFn<ToolCallInfo, BeforeToolCall | undefined>> | undefined
  readonly afterToolCall?: Promised<HookFn<ToolCallInfo & { readonly result: ToolResult }, ToolResult>> | undefined
  readonly onEvent?: Promised<HookFn<Event.Envelope, void>> | undefined
}

export interface PromiseTool {
  readonly name: string
  readonly description: string
  /** Parameters as `effect/Schema` struct fields. */
  readonly parameters: import("effect").Schema.Struct.Fields
  readonly effect: Tools.EffectClass
  readonly handler: (params: any, ctx: { readonly agent: string; readonly root: string }) => Promise<unknown> | unknown
  /** What to look at before a call runs, for `settle` (see `Tools.Definition.observe`). */
  readonly observe?:
    | ((params: any, ctx: { readonly agent: string; readonly root: string }) => Promise<unknown> | unknown)
    | undefined
  /** How an interrupted call settles on resume (see `Tools.Definition.settle`). */
  readonly settle?:
    | ((
        params: any,
        ctx: { readonly agent: string; readonly root: string; readonly observed: unknown }
      ) => Promise<Tools.Settlement> | Tools.Settlement)
    | undefined
}

const fromPromise = <I, O>(
  f: ((input: I) => Promise<O> | O) | undefined,
  hook: string,
  plugin: string
): HookFn<I, O> | undefined =>
  f &&
  ((input: I) =>
    Effect.tryPromise({
      try: async () => await f(input),
      catch: (e) => e
    }).pipe(Effect.orDieWith((e) => new Error(`plugin ${plugin} ${hook} failed: ${String(e)}`))))

/**
 * Make a plugin from Promise-returning hooks and tool handlers. A rejected promise in a tool is
 * reported to the model as a tool failure; in a hook it is a defect naming the plugin.
 */
export const fromPromises = (options: {
  readonly name: string
  readonly hooks?: PromiseHooks | undefined
  readonly tools?: ReadonlyArray<PromiseTool> | undefined
  readonly roles?: ReadonlyArray<Role> | undefined
  /** The plugin keeps nothing between turns that changes what is recorded (allows checkpoints). */
  readonly stateless?: boolean | undefined
}): Plugin => {
  const h = options.hooks ?? {}
  return make({
    name: options.name,
    checkpoint: options.stateless ? "stateless" : undefined,
    hooks: {
      transformPrompt: fromPromise(h.transformPrompt, "transformPrompt", options.name),
      transformContext: fromPromise(h.transformContext, "transformContext", options.name),
      beforeToolCall: fromPromise(h.beforeToolCall, "beforeToolCall", options.name),
      afterToolCall: fromPromise(h.afterToolCall, "afterToolCall", options.name),
      onEvent: fromPromise(h.onEvent, "onEvent", options.name)
    },
    tools: (options.tools ?? []).map((t) =>
      Tools.make({
        name: t.name,
        description: t.description,
        parameters: t.parameters,
        effect: t.effect,
        handler: (params, ctx) =>
          Effect.tryPromise({
            try: async () => await t.handler(params, { agent: ctx.agent, root: ctx.workspace.root }),
            catch: (e) => new Tools.ToolError({ message: e instanceof Error ? e.message : String(e) })
          }),
        observe: t.observe
          ? (params, ctx) =>
              Effect.tryPromise(
                async () => await t.observe!(params, { agent: ctx.agent, root: ctx.workspace.root })
              ).pipe(Effect.orElseSucceed(() => undefined))
          : undefined,
        settle: t.settle
          ? (params, ctx) =>
              Effect.tryPromise({
                try: async () =>
                  await t.settle!(params, { agent: ctx.agent, root: ctx.workspace.root, observed: ctx.observed }),
                catch: (e) => new Tools.ToolError({ message: e instanceof Error ? e.message : String(e) })
              })
          : undefined
      })
    ),
    roles: options.roles
  })
}
