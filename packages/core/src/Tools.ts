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
import { Tool } from "@effect/ai"
import { Context, Effect, Either, Layer, ParseResult, Schema } from "effect"
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

export interface Definition<P = any, S = any> {
  readonly name: string
  readonly description: string
  readonly parametersSchema: Schema.Schema<P, any>
  readonly jsonSchema: object
  readonly effect: EffectClass
  /** Safe to re-run after a crash left its outcome unknown. */
  readonly idempotent: boolean
  readonly handler: (params: P, ctx: CallContext) => Effect.Effect<S, ToolError>
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
  readonly preview?: ((params: P, ctx: CallContext) => Effect.Effect<string | undefined>) | undefined
  /**
   * For a tool whose effect lies outside the files its `paths` name (a git merge, a deployment): what
   * to look at before the call runs (e.g. the branch head). Recorded with the call's start, as an
   * observation (a replay serves it, never compares it), and handed to `settle`.
   */
  readonly observe?: ((params: P, ctx: CallContext) => Effect.Effect<unknown>) | undefined
  /**
   * How a call that was running when the session stopped settles on resume: look at the world (and
   * at what `observe` saw) and say whether its effect happened (`done` with the result it would have
   * had), may run again (`rerun`), or is unknown (`interrupted`). Without it, a `read` or
   * `idempotent` tool re-runs, a `write` tool is judged by the fingerprints of its `paths`, and
   * anything else is reported as interrupted. The settlement is recorded as the call's outcome
   * (with `settled` saying which), so a replay takes it from the log.
   */
  readonly settle?: ((params: P, ctx: SettleContext) => Effect.Effect<Settlement<S>, ToolError>) | undefined
  /**
   * The handler only changes in-session state (the crew, the plan, goals), never the world: it runs
   * again on replay and its result is checked against the log instead of served from it.
   */
  readonly internal: boolean
}

export interface MakeOptions<F extends Schema.Struct.Fields, S> {
  readonly name: string
  readonly description: string
  readonly parameters: F
  readonly effect: EffectClass
  readonly idempotent?: boolean | undefined
  readonly handler: (params: Schema.Struct.Type<F>, ctx: CallContext) => Effect.Effect<S, ToolError>
  readonly summarize?: ((params: Schema.Struct.Type<F>) => string) | undefined
  readonly paths?: ((params: Schema.Struct.Type<F>) => ReadonlyArray<string>) | undefined
  readonly command?: ((params: Schema.Struct.Type<F>) => string) | undefined
  readonly preview?:
    | ((params: Schema.Struct.Type<F>, ctx: CallContext) => Effect.Effect<string | undefined>)
    | undefined
  readonly observe?: ((params: Schema.Struct.Type<F>, ctx: CallContext) => Effect.Effect<unknown>) | undefined
  readonly settle?:
    | ((params: Schema.Struct.Type<F>, ctx: SettleContext) => Effect.Effect<Settlement<S>, ToolError>)
    | undefined
  readonly internal?: boolean | undefined
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

export const make = <const F extends Schema.Struct.Fields, S>(
  options: MakeOptions<F, S>
): Definition<Schema.Struct.Type<F>, S> => {
  if (reservedNames.has(options.name)) {
    throw new Error(`tool name "${options.name}" is reserved by a model provider; choose another name`)
  }
  if (!/^[a-zA-Z0-9_-]{1,64}$/.test(options.name)) {
    throw new Error(`tool name "${options.name}" must match [a-zA-Z0-9_-]{1,64}`)
  }
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
    observe: options.observe,
    settle: options.settle,
    internal: options.internal ?? false
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
