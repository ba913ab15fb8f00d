/**
 * `provider/model` → a `LanguageModel` layer from @effect/ai, with keys and base URLs from the
 * environment, shared retries and timeouts, one meaning of token usage for every provider, and
 * errors that say in one sentence what went wrong and what to do.
 *
 * @example
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * import { Models } from "@musekit/models"
 * import { Effect } from "effect"
 *
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(
 *   Effect.provide(Models.layer("anthropic/claude-sonnet-4-5", { env: process.env, maxRetries: 3 }))
 * )
 * // fails with ModelConfigError "ANTHROPIC_API_KEY is not set: export it, or pick another model with --model"
 * // when the key is missing; `ollama/llama3.2` needs no key.
 *
 * // in Node, over `HttpClientNode` from @musekit/node (keep-alive node:http, less CPU than fetch):
 * // Models.layerWithoutHttpClient(spec, { env: process.env }).pipe(Layer.provide(HttpClientNode.layer))
 * ```
 */
import { LanguageModel } from "@effect/ai"
import type { HttpClient } from "@effect/platform"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Effect, Either, Layer, Redacted, Schema, type Scope } from "effect"
import type * as HttpPolicy from "./HttpPolicy.js"
import { isLoopback, prepare } from "./internal/construct.js"
import * as OpenAiCompatible from "./OpenAiCompatible.js"
import * as Provider from "./Provider.js"

// ---------------------------------------------------------------------------------------------
// Errors

/** A model spec that cannot be turned into a working model. `message` is one sentence for the user. */
export class ModelConfigError extends Schema.TaggedError<ModelConfigError>("@musekit/models/ModelConfigError")(
  "ModelConfigError",
  {
    reason: Schema.Literal(
      "MissingApiKey",
      "UnknownProvider",
      "InvalidSpec",
      "MissingBaseUrl",
      "InvalidBaseUrl",
      "MissingPackage"
    ),
    spec: Schema.String,
    provider: Schema.optional(Schema.String),
    variable: Schema.optional(Schema.String),
    message: Schema.String
  }
) {}

// ---------------------------------------------------------------------------------------------
// Options

/** Options of `layer` / `make` / `resolve`. */
export interface Options extends HttpPolicy.Options {
  /** Where keys and base URLs are read from. Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** Base URL override; beats every environment variable. */
  readonly baseUrl?: string | undefined
  /** API key override; beats every environment variable. */
  readonly apiKey?: string | Redacted.Redacted | undefined
  /**
   * Most tokens per response. Default: the provider's own default, except Anthropic (which
   * requires the field): the model's limit from `ModelInfo`, at most 16,384.
   */
  readonly maxOutputTokens?: number | undefined
  /**
   * Provider request fields merged into every call (`temperature`, `prompt_cache_key`,
   * `strict`, …), as the provider's config accepts them.
   */
  readonly config?: Readonly<Record<string, unknown>> | undefined
  /** An extra HttpClient transform, applied inside the retry policy (e.g. to edit request bodies). */
  readonly transformClient?: ((client: HttpClient.HttpClient) => HttpClient.HttpClient) | undefined
}

/** Everything `make` needs, resolved from a spec, the options and the environment. */
export interface Resolved {
  readonly spec: string
  readonly provider: Provider.Provider
  readonly model: string
  /** Base URL as the provider client expects it (OpenAI-style with `/v1`, Anthropic and Google without). */
  readonly baseUrl: string
  /** Where the base URL came from: "option", an environment variable name, or "default". */
  readonly baseUrlSource: string
  readonly apiKey: Redacted.Redacted | undefined
  /** The environment variable the key came from ("option" when passed in, undefined when none). */
  readonly apiKeyVariable: string | undefined
}

const MUSE_BASE_URL = "MUSE_BASE_URL"

const nonEmpty = (s: string | undefined): string | undefined =>
  s !== undefined && s.trim() !== "" ? s.trim() : undefined

const normalizeBaseUrl = (api: Provider.Api, url: string): string => {
  let u = url.replace(/\/+$/, "")
  if (api === "anthropic") u = u.replace(/\/v1$/, "")
  if (api === "google") u = u.replace(/\/v1(beta|alpha)?$/, "")
  return u
}

const specProblem = (spec: string, problem: Provider.SpecProblem): ModelConfigError => {
  const known = Provider.names.join(", ")
  switch (problem._tag) {
    case "Empty":
      return new ModelConfigError({
        reason: "InvalidSpec",
        spec,
        message: `No model given: write provider/model, e.g. anthropic/claude-sonnet-4-5 or ollama/llama3.2.`
      })
    case "NoProvider":
      return new ModelConfigError({
        reason: "InvalidSpec",
        spec,
        message: `'${spec}' does not name a provider: write provider/model, e.g. ollama/${problem.model} (known providers: ${known}).`
      })
    case "NoModel":
      return new ModelConfigError({
        reason: "InvalidSpec",
        spec,
        provider: problem.provider,
        message: `'${spec}' names no model: write ${problem.provider}/<model>.`
      })
    case "UnknownProvider":
      return new ModelConfigError({
        reason: "UnknownProvider",
        spec,
        provider: problem.provider,
        message: `Unknown model provider '${problem.provider}' in '${spec}': known providers are ${known}.`
      })
  }
}

/** Resolves a spec against the options and the environment, without touching the network. */
export const resolve = (spec: string, options: Options = {}): Either.Either<Resolved, ModelConfigError> => {
  const parsed = Provider.parseSpec(spec)
  if (Either.isLeft(parsed)) return Either.left(specProblem(spec, parsed.left))
  const { provider, model } = parsed.right
  const env = options.env ?? process.env

  // Base URL: option > provider variable > MUSE_BASE_URL > default
  let baseUrl: string | undefined
  let baseUrlSource = "default"
  const fromEnv = [...provider.baseUrlEnv, MUSE_BASE_URL].find((v) => nonEmpty(env[v]) !== undefined)
  if (nonEmpty(options.baseUrl) !== undefined) {
    baseUrl = nonEmpty(options.baseUrl)
    baseUrlSource = "option"
  } else if (fromEnv !== undefined) {
    baseUrl = nonEmpty(env[fromEnv])
    baseUrlSource = fromEnv
  } else baseUrl = provider.baseUrl
  if (baseUrl === undefined) {
    return Either.left(
      new ModelConfigError({
        reason: "MissingBaseUrl",
        spec,
        provider: provider.name,
        variable: provider.baseUrlEnv[0],
        message: `${provider.name} needs a server URL: set ${provider.baseUrlEnv[0]} (or ${MUSE_BASE_URL}), or use a preset such as ollama/${model}.`
      })
    )
  }
  try {
    const u = new URL(baseUrl)
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("not http")
  } catch {
    const where = baseUrlSource === "option" ? "The baseUrl option" : baseUrlSource
    return Either.left(
      new ModelConfigError({
        reason: "InvalidBaseUrl",
        spec,
        provider: provider.name,
        ...(baseUrlSource !== "option" ? { variable: baseUrlSource } : {}),
        message: `${where} is not an http(s) URL: '${baseUrl}'.`
      })
    )
  }
  baseUrl = normalizeBaseUrl(provider.api, baseUrl)

  // API key: option > provider variables in order
  let apiKey: Redacted.Redacted | undefined
  let apiKeyVariable: string | undefined
  if (options.apiKey !== undefined) {
    const k = Redacted.isRedacted(options.apiKey) ? options.apiKey : Redacted.make(options.apiKey)
    if (nonEmpty(Redacted.value(k)) !== undefined) {
      apiKey = k
      apiKeyVariable = "option"
    }
  }
  if (apiKey === undefined) {
    const v = provider.apiKeyEnv.find((name) => nonEmpty(env[name]) !== undefined)
    if (v !== undefined) {
      apiKey = Redacted.make(nonEmpty(env[v])!)
      apiKeyVariable = v
    }
  }
  if (apiKey === undefined && provider.requiresApiKey && !isLoopback(baseUrl)) {
    const [first, ...rest] = provider.apiKeyEnv
    const named = rest.length === 0 ? first! : `${first} (or ${rest.join(", ")})`
    return Either.left(
      new ModelConfigError({
        reason: "MissingApiKey",
        spec,
        provider: provider.name,
        variable: first!,
        message: `${named} is not set: export it, or pick another model with --model.`
      })
    )
  }
  return Either.right({ spec, provider, model, baseUrl, baseUrlSource, apiKey, apiKeyVariable })
}

// ---------------------------------------------------------------------------------------------
// Construction

/**
 * Builds the provider's `LanguageModel` for an already resolved spec. A provider's client is loaded
 * when it is first used (`@musekit/models/openai`, `/anthropic`, `/google`), so a program that talks to
 * one provider never loads the others. No provider needs a provider package.
 */
export const makeResolved = (
  r: Resolved,
  options: Options = {}
): Effect.Effect<LanguageModel.Service, ModelConfigError, HttpClient.HttpClient | Scope.Scope> => {
  switch (r.provider.api) {
    case "openai":
      return Effect.flatMap(
        Effect.promise(() => import("./OpenAi.js")),
        (m) => m.make(r, options)
      )
    case "anthropic":
      return Effect.flatMap(
        Effect.promise(() => import("./Anthropic.js")),
        (m) => m.make(r, options)
      )
    case "google":
      return Effect.flatMap(
        Effect.promise(() => import("./Google.js")),
        (m) => m.make(r, options)
      )
    case "openai-compatible":
      return Effect.gen(function* () {
        const { transform, config, finish } = prepare(r, options)
        if (options.maxOutputTokens !== undefined) config.max_tokens = options.maxOutputTokens
        const inner = yield* OpenAiCompatible.make({
          model: r.model,
          apiUrl: r.baseUrl,
          apiKey: r.apiKey,
          provider: r.provider.name,
          config,
          transformClient: transform
        })
        return finish(inner)
      })
  }
}

/** Builds the `LanguageModel` for a spec; needs an `HttpClient`. */
export const make = (
  spec: string,
  options: Options = {}
): Effect.Effect<LanguageModel.Service, ModelConfigError, HttpClient.HttpClient | Scope.Scope> =>
  Effect.flatMap(
    Effect.suspend(() => resolve(spec, options)),
    (r) => makeResolved(r, options)
  )

/**
 * The `LanguageModel` layer for a spec, using the HttpClient it is given: in Node,
 * `HttpClientNode.layer` from `@musekit/node`.
 */
export const layerWithoutHttpClient = (
  spec: string,
  options: Options = {}
): Layer.Layer<LanguageModel.LanguageModel, ModelConfigError, HttpClient.HttpClient> =>
  Layer.scoped(LanguageModel.LanguageModel, make(spec, options))

/**
 * The `LanguageModel` layer for a spec, over the runtime's `fetch` (undici in Node), for any runtime.
 * In Node, `layerWithoutHttpClient` with `HttpClientNode.layer` from `@musekit/node` costs less CPU per call.
 */
export const layer = (
  spec: string,
  options: Options = {}
): Layer.Layer<LanguageModel.LanguageModel, ModelConfigError> =>
  layerWithoutHttpClient(spec, options).pipe(Layer.provide(FetchHttpClient.layer))

/** A short description of a resolved model, for status lines: `anthropic/claude-sonnet-4-5 @ https://api.anthropic.com`. */
export const describe = (r: Resolved): string => `${r.provider.name}/${r.model} @ ${r.baseUrl}`
