/**
 * Tools an agent may call, each declaring its effect class (`read`, `write`, `exec`, `network`).
 *
 * A tool is a definition (name, description, parameter schema, handler) built on `@effect/ai`'s
 * `Tool`: the model sees the JSON schema of its parameters, the agent loop validates the arguments
 * itself (so malformed arguments go back to the model as a tool failure), asks `Approvals`, and
 * runs the handler against the calling agent's `Workspace`.
 *
 * @example
 * ```ts
 * import { Tools } from "@musekit/core"
 * import { Effect, Schema } from "effect"
 *
 * const Echo = Tools.make({
 *   name: "echo",
 *   description: "Repeat a message",
 *   parameters: { message: Schema.String },
 *   effect: "read",
 *   handler: ({ message }) => Effect.succeed({ message })
 * })
 * const layer = Tools.layer([Echo])
 * ```
 */
import { Tool, type Toolkit } from "@effect/ai"
import { Cause, Context, Effect, Either, Layer, ParseResult, Schema } from "effect"
import type * as Workspace from "./Workspace.js"

/** What a tool may do to the world; approvals and resume decisions are made on it. */
export type EffectClass = "read" | "write" | "exec" | "network"

/** A tool handler's failure: reported to the model as a failed tool result, never a crash. */
export class ToolError extends Schema.TaggedError<ToolError>("@musekit/core/ToolError")("ToolError", {
  message: Schema.String,
  data: Schema.optional(Schema.Unknown)
}) {}

/** What a handler gets besides its parameters. */
export interface CallContext {
  readonly agent: string
  readonly callId: string
  readonly workspace: Workspace.Service
  /** Stream progress (e.g. shell output) to the UI; not recorded. */
  readonly progress: (chunk: string) => Effect.Effect<void>
  /**
   * A person answered "run unsandboxed" for this call (see `Definition.unsandboxed`): the tool
   * starts its processes outside the OS sandbox. Never set by a rule or a mode.
   */
  readonly unsandboxed?: boolean | undefined
}

/**
 * How a call the session stopped in the middle of ends, decided on resume by looking at the world
 * (see `Definition.settle`): its effect happened and this is its result (`done`), it did not
 * happen or may safely happen again (`rerun`), or nobody can tell (`interrupted`: the model is told
 * the effect may be partial).
 */
export type Settlement<S = unknown> =
  | { readonly _tag: "done"; readonly result: S }
  | { readonly _tag: "rerun" }
  | { readonly _tag: "interrupted"; readonly reason?: string | undefined }

export const Settlement = {
  done: <S>(result: S): Settlement<S> => ({ _tag: "done", result }),
  rerun: { _tag: "rerun" } as Settlement<never>,
  interrupted: (reason?: string): Settlement<never> =>
    reason === undefined ? { _tag: "interrupted" } : { _tag: "interrupted", reason }
}

/** What `settle` gets besides the call's parameters: the call's context and what `observe` saw before it ran. */
export interface SettleContext extends CallContext {
  /** The value `observe` returned when the call started (`undefined` without `observe`, or in logs from before it). */
  readonly observed: unknown
}

/**
 * A tool. `R` is what its handler (and `preview`, `observe`, `settle`) need: nothing for the tools
 * of `Tools.layer`; a plugin's tools may need what its layer provides (see `Plugin.make`).
 */
export interface Definition<P = any, S = any, R = never> {
  readonly name: string
  readonly description: string
  readonly parametersSchema: Schema.Schema<P, any>
  readonly jsonSchema: object
  readonly effect: EffectClass
  /** Safe to re-run after a crash left its outcome unknown. */
  readonly idempotent: boolean
  readonly handler: (params: P, ctx: CallContext) => Effect.Effect<S, ToolError, R>
  /** One line for approval prompts and the UI, e.g. the exact command. */
  readonly summarize: (params: P) => string
  /**
   * Workspace paths the call names: a write tool's are fingerprinted before it runs; approval rules
   * match them, and a write to a protected path (`.git`, `.muse`, `.claude`) always asks.
   */
  readonly paths: (params: P) => ReadonlyArray<string>
  /**
   * The shell command the call runs, for tools that run one: approval rules then match its argv
   * words after parsing, never the text (see `Shell`).
   */
  readonly command?: ((params: P) => string) | undefined
  /** A preview for approval prompts, e.g. a diff. */
  readonly preview?: ((params: P, ctx: CallContext) => Effect.Effect<string | undefined, never, R>) | undefined
  /**
   * Whether the call asks to run outside the OS sandbox (e.g. `run_shell` with `unsandboxed: true`
   * after the sandbox blocked a command). Such a call always asks, and only a person's "run
   * unsandboxed" answer lets it out (`CallContext.unsandboxed`).
   */
  readonly unsandboxed?: ((params: P) => boolean) | undefined
  /**
   * For a tool whose effect lies outside the files its `paths` name (a git merge, a deployment): what
   * to look at before the call runs (e.g. the branch head). Recorded with the call's start, as an
   * observation (a replay serves it, never compares it), and handed to `settle`.
   */
  readonly observe?: ((params: P, ctx: CallContext) => Effect.Effect<unknown, never, R>) | undefined
  /**
   * How a call that was running when the session stopped settles on resume: look at the world (and
   * at what `observe` saw) and say whether its effect happened (`done` with the result it would have
   * had), may run again (`rerun`), or is unknown (`interrupted`). Without it, a `read` or
   * `idempotent` tool re-runs, a `write` tool is judged by the fingerprints of its `paths`, and
   * anything else is reported as interrupted. The settlement is recorded as the call's outcome
   * (with `settled` saying which), so a replay takes it from the log.
   */
  readonly settle?: ((params: P, ctx: SettleContext) => Effect.Effect<Settlement<S>, ToolError, R>) | undefined
  /**
   * The handler only changes in-session state (the crew, the plan, goals), never the world: it runs
   * again on replay and its result is checked against the log instead of served from it.
   */
  readonly internal: boolean
  /**
   * What the model sees of a result larger than its budget (e.g. the first matches, with how many
   * there are in all and how to narrow the call). The whole result stays in the log. Without it,
   * or when its answer is still too large, `fitResult` cuts the result generically.
   */
  readonly fit?: ((result: S, budget: Budget) => unknown) | undefined
  /**
   * `false`: a `read` tool whose handler is this process's own code (reading files, listing,
   * searching, in-session state) may start before its `tool.started` intent is durable, sparing the
   * call a wait for the disk; a crash that loses the intent loses nothing a resume needs (the call
   * runs again). Default, and always for any other effect class: the call waits. Leave it unset for
   * a tool run by another process on the strength of that process's own claim (an MCP server's
   * `readOnlyHint`): its "read-only" is not trusted with durability.
   */
  readonly durableIntent?: boolean | undefined
}

export interface MakeOptions<F extends Schema.Struct.Fields, S, R = never> {
  readonly name: string
  readonly description: string
  readonly parameters: F
  readonly effect: EffectClass
  readonly idempotent?: boolean | undefined
  readonly handler: (params: Schema.Struct.Type<F>, ctx: CallContext) => Effect.Effect<S, ToolError, R>
  readonly summarize?: ((params: Schema.Struct.Type<F>) => string) | undefined
  readonly paths?: ((params: Schema.Struct.Type<F>) => ReadonlyArray<string>) | undefined
  readonly command?: ((params: Schema.Struct.Type<F>) => string) | undefined
  readonly preview?:
    | ((params: Schema.Struct.Type<F>, ctx: CallContext) => Effect.Effect<string | undefined, never, R>)
    | undefined
  readonly unsandboxed?: ((params: Schema.Struct.Type<F>) => boolean) | undefined
  readonly observe?: ((params: Schema.Struct.Type<F>, ctx: CallContext) => Effect.Effect<unknown, never, R>) | undefined
  readonly settle?:
    | ((params: Schema.Struct.Type<F>, ctx: SettleContext) => Effect.Effect<Settlement<S>, ToolError, R>)
    | undefined
  readonly internal?: boolean | undefined
  readonly fit?: ((result: S, budget: Budget) => unknown) | undefined
  /** See `Definition.durableIntent`. */
  readonly durableIntent?: boolean | undefined
}

/** Names some providers reserve for their own built-in tools; a user tool must not use them. */
export const reservedNames: ReadonlySet<string> = new Set([
  "bash",
  "code_execution",
  "computer",
  "str_replace_based_edit_tool",
  "str_replace_editor",
  "web_search",
  "text_editor"
])

const checkName = (name: string) => {
  if (reservedNames.has(name)) {
    throw new Error(`tool name "${name}" is reserved by a model provider; choose another name`)
  }
  if (!/^[a-zA-Z0-9_-]{1,64}$/.test(name)) {
    throw new Error(`tool name "${name}" must match [a-zA-Z0-9_-]{1,64}`)
  }
}

export const make = <const F extends Schema.Struct.Fields, S, R = never>(
  options: MakeOptions<F, S, R>
): Definition<Schema.Struct.Type<F>, S, R> => {
  checkName(options.name)
  const parametersSchema = Schema.Struct(options.parameters)
  const jsonSchema = Tool.getJsonSchemaFromSchemaAst(parametersSchema.ast)
  return {
    name: options.name,
    description: options.description,
    parametersSchema: parametersSchema as any,
    jsonSchema,
    effect: options.effect,
    idempotent: options.idempotent ?? options.effect === "read",
    handler: options.handler,
    summarize: options.summarize ?? ((p) => `${options.name} ${JSON.stringify(p)}`),
    paths: options.paths ?? (() => []),
    command: options.command,
    preview: options.preview,
    unsandboxed: options.unsandboxed,
    observe: options.observe,
    settle: options.settle,
    internal: options.internal ?? false,
    fit: options.fit,
    durableIntent: options.durableIntent
  }
}

/**
 * The tools of an existing @effect/ai `Toolkit` as MuseKit tools, run by the toolkit's own
 * handlers (provide them with `toolkit.toLayer(handlers)`). Each tool needs an effect class for
 * approvals: one for all, or one per tool name (unnamed ones default to `exec`, which asks).
 * A handler failure (with `failureMode: "return"`, or a thrown error) goes back to the model.
 *
 * @example
 * ```ts
 * const Lookup = Tool.make("lookup", { parameters: { word: Schema.String }, success: Schema.String })
 * const Dict = Toolkit.make(Lookup)
 * const tools = yield* Tools.fromToolkit(Dict, { effect: "read" }).pipe(
 *   Effect.provide(Dict.toLayer({ lookup: ({ word }) => Effect.succeed(`${word}: hello`) }))
 * )
 * ```
 */
export const fromToolkit = <T extends Record<string, Tool.Any>>(
  toolkit: Toolkit.Toolkit<T>,
  options: { readonly effect: EffectClass | { readonly [K in keyof T]?: EffectClass } }
): Effect.Effect<ReadonlyArray<Definition>, never, Tool.HandlersFor<T>> =>
  Effect.map(toolkit, (withHandler) =>
    Object.values(toolkit.tools).map((t): Definition => {
      checkName(t.name)
      const effect =
        typeof options.effect === "string"
          ? options.effect
          : ((options.effect as Record<string, EffectClass | undefined>)[t.name] ?? "exec")
      const handle = withHandler.handle as (
        name: string,
        params: unknown
      ) => Effect.Effect<{ readonly isFailure: boolean; readonly encodedResult: unknown }, unknown, never>
      return {
        name: t.name,
        description: t.description ?? t.name,
        parametersSchema: t.parametersSchema as Schema.Schema<any, any>,
        jsonSchema: Tool.getJsonSchemaFromSchemaAst(t.parametersSchema.ast),
        effect,
        idempotent: effect === "read",
        handler: (params) =>
          handle(t.name, params).pipe(
            Effect.catchAllCause((cause) =>
              Effect.fail(new ToolError({ message: `${t.name} failed: ${String(Cause.squash(cause))}` }))
            ),
            Effect.flatMap((r) =>
              r.isFailure
                ? Effect.fail(new ToolError({ message: JSON.stringify(r.encodedResult) }))
                : Effect.succeed(r.encodedResult)
            )
          ),
        summarize: (p) => `${t.name} ${JSON.stringify(p)}`,
        paths: () => [],
        internal: false
      }
    })
  )

/** Arguments of a tool described by a JSON schema: an object of any members. */
export type JsonArguments = { readonly [key: string]: unknown }

export interface FromJsonSchemaOptions<S>
  extends Omit<
    MakeOptions<{}, S>,
    "parameters" | "handler" | "summarize" | "paths" | "preview" | "command" | "unsandboxed" | "observe" | "settle"
  > {
  /** The parameters as a JSON schema (of an object), shown to the model as it is. */
  readonly jsonSchema: object
  /**
   * Checks arguments against `jsonSchema` (with a JSON Schema validator of the caller's choice):
   * `undefined` when they fit, else what is wrong, for the model to read.
   */
  readonly validate: (params: JsonArguments) => string | undefined
  readonly handler: (params: JsonArguments, ctx: CallContext) => Effect.Effect<S, ToolError>
  readonly summarize?: ((params: JsonArguments) => string) | undefined
  readonly paths?: ((params: JsonArguments) => ReadonlyArray<string>) | undefined
  readonly preview?: ((params: JsonArguments, ctx: CallContext) => Effect.Effect<string | undefined>) | undefined
  readonly command?: ((params: JsonArguments) => string) | undefined
}

/**
 * A tool whose parameters come as a JSON schema rather than an `effect/Schema` (tools of an MCP
 * server, say). The agent loop checks a call's arguments with `validate` before approvals, like
 * any tool's, and a failed check goes back to the model as the reason.
 *
 * @example
 * ```ts
 * const Sum = Tools.fromJsonSchema({
 *   name: "sum",
 *   description: "Add two numbers",
 *   jsonSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
 *   validate: (p) => (typeof p.a === "number" && typeof p.b === "number" ? undefined : "a and b must be numbers"),
 *   effect: "read",
 *   handler: (p) => Effect.succeed((p.a as number) + (p.b as number))
 * })
 * ```
 */
export const fromJsonSchema = <S>(options: FromJsonSchemaOptions<S>): Definition<JsonArguments, S> => {
  checkName(options.name)
  const parametersSchema = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
    Schema.filter((params) => options.validate(params) ?? true, {
      identifier: "arguments",
      description: `the arguments of ${options.name}`
    })
  )
  return {
    name: options.name,
    description: options.description,
    parametersSchema: parametersSchema as any,
    jsonSchema: options.jsonSchema,
    effect: options.effect,
    idempotent: options.idempotent ?? options.effect === "read",
    handler: options.handler,
    summarize: options.summarize ?? ((p) => `${options.name} ${JSON.stringify(p)}`),
    paths: options.paths ?? (() => []),
    preview: options.preview,
    command: options.command,
    internal: options.internal ?? false,
    durableIntent: options.durableIntent
  }
}

// one decoder per parameter schema (building it walks the schema; every tool call needs it)
const decoders = new WeakMap<object, (u: unknown) => Either.Either<unknown, ParseResult.ParseError>>()

/** Decode model-supplied arguments; a clear message when they do not fit the schema. */
export const decodeParams = (def: Definition, params: unknown): Effect.Effect<unknown, ToolError> =>
  Effect.suspend(() => {
    let decode = decoders.get(def.parametersSchema)
    if (!decode) {
      const d = Schema.decodeUnknownEither(def.parametersSchema as Schema.Schema<unknown, unknown, never>, {
        errors: "all",
        onExcessProperty: "ignore"
      })
      decode = (u) => d(u)
      decoders.set(def.parametersSchema, decode)
    }
    const r = decode(params)
    return Either.isRight(r)
      ? Effect.succeed(r.right)
      : Effect.fail(
          new ToolError({
            message: `invalid arguments for ${def.name}: ${ParseResult.TreeFormatter.formatErrorSync(r.left)}`
          })
        )
  })

const LooseParams = (jsonSchema: object) =>
  Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({ jsonSchema })

/**
 * The `@effect/ai` tool the model sees. Its parameter schema accepts any object (validation is the
 * loop's job), but advertises the definition's JSON schema.
 */
export const toAiTool = (def: Definition): Tool.Any =>
  Tool.make(def.name, {
    description: def.description,
    success: Schema.Unknown,
    failure: Schema.Unknown,
    failureMode: "return"
  }).setParameters(LooseParams(def.jsonSchema)) as unknown as Tool.Any

// ---------------------------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------------------------

export interface Service {
  readonly list: ReadonlyArray<Definition>
  readonly get: (name: string) => Definition | undefined
}

export class Tools extends Context.Tag("@musekit/core/Tools")<Tools, Service>() {}

export const fromList = (defs: ReadonlyArray<Definition>): Service => {
  const byName = new Map<string, Definition>()
  for (const d of defs) byName.set(d.name, d)
  const list = [...byName.values()]
  return { list, get: (name) => byName.get(name) }
}

export const layer = (defs: ReadonlyArray<Definition>): Layer.Layer<Tools> => Layer.succeed(Tools, fromList(defs))

export const layerEmpty: Layer.Layer<Tools> = layer([])

/** Tools from an effect (factories that need services, e.g. a file system). */
export const layerEffect = <E, R>(defs: Effect.Effect<ReadonlyArray<Definition>, E, R>): Layer.Layer<Tools, E, R> =>
  Layer.effect(Tools, Effect.map(defs, fromList))

// ---------------------------------------------------------------------------------------------
// Result budget
// ---------------------------------------------------------------------------------------------

/** How much of the model's context one tool result may take. */
export interface Budget {
  readonly tokens: number
  /** The same budget in UTF-8 bytes of the result's JSON (`tokens * BYTES_PER_TOKEN`). */
  readonly bytes: number
}

/**
 * Bytes counted per token when a budget in tokens is checked against a result's JSON. Source code
 * and prose take 3 to 4.5 bytes per token with current tokenizers (paths full of digits less);
 * 2.5 leaves room for denser text.
 */
export const BYTES_PER_TOKEN = 2.5

/** A budget of `tokens` tokens. */
export const budgetOf = (tokens: number): Budget => ({ tokens, bytes: tokens * BYTES_PER_TOKEN })

/**
 * The budget of one tool result for a model with this context window: a tenth of the window,
 * between 1,000 and 25,000 tokens, so no single result can fill the context (compaction starts at
 * three quarters of it).
 */
export const resultBudget = (contextWindow: number): Budget =>
  budgetOf(Math.max(1_000, Math.min(25_000, Math.floor(contextWindow / 10))))

/** A count with thousands separators: `2631` → `"2,631"`. */
export const formatCount = (n: number): string => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",")

/** UTF-8 length of a string, without encoding it. */
export const utf8Length = (s: string): number => {
  let n = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) continue
    if (c < 0x800) n += 1
    else if (c >= 0xd800 && c <= 0xdbff)
      i++ // a surrogate pair: 4 bytes for 2 code units
    else n += 2
  }
  return n
}

/** UTF-8 length of a value's JSON. */
export const jsonBytes = (value: unknown): number => utf8Length(JSON.stringify(value ?? null))

/** The start of `s` that fits in `bytes` UTF-8 bytes (never splitting a character). */
export const cutToBytes = (s: string, bytes: number): string => {
  if (s.length <= bytes / 3) return s
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    const w = c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdbff ? 4 : 3
    if (n + w > bytes) return s.slice(0, i)
    n += w
    if (w === 4) i++
  }
  return s
}

/**
 * What the model sees of a tool result: the result itself when its JSON fits the budget, else the
 * tool's own `fit`, else its start with a note saying how large it was. Deterministic, so a replay
 * sends the model exactly what the recorded run sent.
 */
export const fitResult = (def: Definition | undefined, result: unknown, budget: Budget): unknown => {
  const size = jsonBytes(result)
  if (size <= budget.bytes) return result
  if (def?.fit) {
    const fitted = def.fit(result, budget)
    if (jsonBytes(fitted) <= budget.bytes) return fitted
  }
  const note = `this result is ${Math.ceil(size / 1024)} KiB, more than the ${formatCount(budget.tokens)}-token budget of one tool result; only its start is shown. Ask for less (a narrower path, a pattern, a line range).`
  let room = Math.max(0, budget.bytes - utf8Length(note) - 64)
  const text = typeof result === "string" ? result : JSON.stringify(result ?? null)
  for (;;) {
    const start = cutToBytes(text, room)
    const fitted = typeof result === "string" ? `${start}\n[${note}]` : { note, start }
    // escaping in the JSON may make the cut text longer than it was
    if (room === 0 || jsonBytes(fitted) <= budget.bytes) return fitted
    room = Math.floor(room * 0.8)
  }
}
