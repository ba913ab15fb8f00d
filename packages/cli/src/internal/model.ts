/**
 * From a `provider/model` spec to a `LanguageModel` layer. Provider code is loaded only when a
 * real provider is used; `scripted/<name>` is the test model of `scripted.ts`.
 */
import type { LanguageModel } from "@effect/ai"
import type { HttpPolicy } from "@musekit/models"
import { HttpClientNode } from "@musekit/node"
import { Effect, Either, Layer } from "effect"
import * as Config from "./config.js"
import { CliError, ExitCode } from "./exit.js"
import * as ModelInfo from "./modelInfo.js"
import * as Scripted from "./scripted.js"
import { version } from "./version.js"

/** The model used when none is configured, by the API key that is set. */
export const defaults: ReadonlyArray<{ readonly variable: string; readonly spec: string }> = [
  { variable: "ANTHROPIC_API_KEY", spec: "anthropic/claude-sonnet-4-5" },
  { variable: "OPENAI_API_KEY", spec: "openai/gpt-4.1" },
  { variable: "GEMINI_API_KEY", spec: "google/gemini-2.5-pro" },
  { variable: "GOOGLE_API_KEY", spec: "google/gemini-2.5-pro" }
]

export const defaultFor = (env: NodeJS.ProcessEnv): Config.ModelChoice | undefined => {
  const hit = defaults.find((d) => (env[d.variable] ?? "").trim() !== "")
  return hit ? { spec: hit.spec, source: `${hit.variable} is set` } : undefined
}

/** The one screen shown when there is no model to talk to. */
export const noKeyScreen = (problem?: string): string =>
  [
    ...(problem ? [problem, ""] : []),
    "muse needs a language model to talk to.",
    "",
    "Set an API key for a hosted provider:",
    "  export ANTHROPIC_API_KEY=...   uses anthropic/claude-sonnet-4-5",
    "  export OPENAI_API_KEY=...      uses openai/gpt-4.1",
    "  export GEMINI_API_KEY=...      uses google/gemini-2.5-pro",
    "",
    "Or use a local OpenAI-compatible server (no key needed):",
    "  muse --model ollama/qwen2.5-coder       Ollama on 127.0.0.1:11434",
    "  muse --model lmstudio/<model>           also vllm/, llamacpp/",
    "  OPENAI_COMPATIBLE_BASE_URL=http://host:8000/v1 \\",
    "    muse --model openai-compatible/<model>",
    "",
    'Keep a choice: "model": "<provider/model>" in ~/.config/muse/config.json',
    "or .muse/config.json, or export MUSE_MODEL=<provider/model>.",
    "",
    "No key yet? Watch a recorded session:  muse replay --example"
  ].join("\n")

export interface Options {
  readonly env: NodeJS.ProcessEnv
  readonly scriptFlag?: string | undefined
  readonly onRequest?: (() => void) | undefined
  /** Told before the HTTP client waits to retry a request (429, 5xx, a lost connection). */
  readonly onRetry?: ((retry: Retry) => void) | undefined
  /**
   * The session id: OpenAI's Responses API gets it as `prompt_cache_key`, so every request of the
   * session is routed to the prompt cache that holds its prefix.
   */
  readonly session?: string | undefined
}

/** A retry the model's HTTP client is about to wait for. */
export type Retry = HttpPolicy.Retry

/** Check a spec without building anything (no network). */
export const check = (spec: string, options: Options): Effect.Effect<void, CliError> =>
  Effect.asVoid(languageModel(spec, options))

/** The `LanguageModel` layer for a spec; a config problem is a `CliError` with exit code 2. */
export const languageModel = (
  spec: string,
  options: Options
): Effect.Effect<Layer.Layer<LanguageModel.LanguageModel>, CliError> =>
  Effect.gen(function* () {
    if (Scripted.isScripted(spec) || options.scriptFlag) {
      const file = yield* Scripted.scriptFile(spec, options)
      const script = yield* Scripted.load(file)
      return Scripted.layer(script, { onRequest: options.onRequest })
    }
    const { Models } = yield* Effect.promise(() => import("@musekit/models"))
    const resolved = Models.resolve(spec, { env: options.env })
    if (Either.isLeft(resolved)) {
      const e = resolved.left
      return yield* new CliError({
        code: ExitCode.Usage,
        message: e.message,
        detail: e.reason === "MissingApiKey" ? noKeyScreen() : undefined
      })
    }
    const onRetry = options.onRetry
    // (OpenAI-compatible servers are left out: a strict one refuses fields it does not know)
    const cacheKey =
      options.session !== undefined && resolved.right.provider.api === "openai"
        ? { config: { prompt_cache_key: `muse-${options.session}` } }
        : {}
    return Models.layerWithoutHttpClient(spec, {
      env: options.env,
      ...cacheKey,
      ...(onRetry ? { onRetry: (retry: Retry) => Effect.sync(() => onRetry(retry)) } : {})
    }).pipe(Layer.provide(HttpClientNode.layerWith({ userAgent: `muse/${version()}` })), Layer.orDie)
  })

/** A model's context window and where it came from (shown to the user, recorded with the session). */
export interface Window {
  readonly tokens: number
  readonly source: string
}

/**
 * The context window a new session runs with: `--context-window`, else the config files'
 * `models.<spec>.contextWindow`, else the model table, else — for a model the table does not know
 * on an OpenAI-compatible server — what the server reports (vLLM, llama.cpp, Ollama, LM Studio),
 * else the table's conservative default.
 */
export const contextWindow = (
  spec: string,
  options: { readonly flag?: number | undefined; readonly loaded: Config.Loaded; readonly env: NodeJS.ProcessEnv }
): Effect.Effect<Window> =>
  Effect.gen(function* () {
    if (options.flag !== undefined) return { tokens: options.flag, source: "--context-window" }
    const configured = Config.configuredWindow(spec, options.loaded)
    if (configured) return configured
    const known = ModelInfo.lookup(spec)
    if (known) return { tokens: known.contextWindow, source: "the model table" }
    const fallback = { tokens: ModelInfo.defaultContextWindow, source: "the default for unknown models" }
    if (Scripted.isScripted(spec)) return fallback
    const reported = yield* Effect.promise(() => serverWindow(spec, options.env))
    return reported ?? fallback
  })

const serverWindow = async (spec: string, env: NodeJS.ProcessEnv): Promise<Window | undefined> => {
  const { Models, OpenAiCompatible } = await import("@musekit/models")
  const resolved = Models.resolve(spec, { env })
  if (Either.isLeft(resolved) || resolved.right.provider.api !== "openai-compatible") return undefined
  const r = resolved.right
  const NodeHttpClient = await import("@effect/platform-node/NodeHttpClient")
  const found = await Effect.runPromise(
    OpenAiCompatible.contextWindow({
      model: r.model,
      apiUrl: r.baseUrl,
      provider: r.provider.name,
      apiKey: r.apiKey
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )
  return found._tag === "Some" ? { tokens: found.value.tokens, source: found.value.source } : undefined
}
