/**
 * The table of model providers MuseKit knows, and the parser for `provider/model` strings.
 *
 * Four wire formats are spoken: `openai` (Responses API), `anthropic` (Messages API), `google`
 * (Gemini generateContent) and `openai-compatible` (Chat Completions). Local servers and hosted
 * gateways that speak Chat Completions are named presets (`ollama`, `vllm`, `llamacpp`, `lmstudio`,
 * `openrouter`, `llama-api`), so `ollama/llama3.2` works without any configuration.
 *
 * @example
 * ```ts
 * import { Provider } from "@musekit/models"
 *
 * Provider.parseSpec("ollama/qwen2.5-coder:7b")
 * // Either.right({ provider: { name: "ollama", api: "openai-compatible", ... }, model: "qwen2.5-coder:7b" })
 * Provider.get("openrouter")?.baseUrl // "https://openrouter.ai/api/v1"
 * Provider.names // ["openai", "anthropic", "google", "openai-compatible", "ollama", ...]
 * ```
 */
import { Either } from "effect"

/** The wire format a provider speaks. */
export type Api = "openai" | "anthropic" | "google" | "openai-compatible"

/** One entry of the provider table. */
export interface Provider {
  /** The name used in `provider/model` strings. */
  readonly name: string
  /** Human-readable name, used in messages. */
  readonly label: string
  /** The wire format. */
  readonly api: Api
  /** Default base URL (OpenAI-style URLs include `/v1`); `undefined` when the user must give one. */
  readonly baseUrl: string | undefined
  /** Environment variables that override the base URL, in order of preference (after `MUSE_BASE_URL`). */
  readonly baseUrlEnv: ReadonlyArray<string>
  /** Environment variables holding the API key, in order of preference. */
  readonly apiKeyEnv: ReadonlyArray<string>
  /** Whether a request without an API key is refused before it is sent. */
  readonly requiresApiKey: boolean
  /** A server on this machine (no key needed, connection refused means "not running"). */
  readonly local: boolean
  /** Other names accepted for this provider. */
  readonly aliases: ReadonlyArray<string>
}

/** Every provider, in the order they are listed to users. */
export const providers: ReadonlyArray<Provider> = [
  {
    name: "openai",
    label: "OpenAI",
    api: "openai",
    baseUrl: "https://api.openai.com/v1",
    baseUrlEnv: ["OPENAI_BASE_URL"],
    apiKeyEnv: ["OPENAI_API_KEY"],
    requiresApiKey: true,
    local: false,
    aliases: []
  },
  {
    name: "anthropic",
    label: "Anthropic",
    api: "anthropic",
    baseUrl: "https://api.anthropic.com",
    baseUrlEnv: ["ANTHROPIC_BASE_URL"],
    apiKeyEnv: ["ANTHROPIC_API_KEY"],
    requiresApiKey: true,
    local: false,
    aliases: ["claude"]
  },
  {
    name: "google",
    label: "Google",
    api: "google",
    baseUrl: "https://generativelanguage.googleapis.com",
    baseUrlEnv: ["GOOGLE_BASE_URL", "GEMINI_BASE_URL"],
    apiKeyEnv: ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    requiresApiKey: true,
    local: false,
    aliases: ["gemini"]
  },
  {
    name: "openai-compatible",
    label: "OpenAI-compatible server",
    api: "openai-compatible",
    baseUrl: undefined,
    baseUrlEnv: ["OPENAI_COMPATIBLE_BASE_URL"],
    apiKeyEnv: ["OPENAI_COMPATIBLE_API_KEY"],
    requiresApiKey: false,
    local: false,
    aliases: ["compat"]
  },
  {
    name: "ollama",
    label: "Ollama",
    api: "openai-compatible",
    baseUrl: "http://127.0.0.1:11434/v1",
    baseUrlEnv: ["OLLAMA_BASE_URL"],
    apiKeyEnv: ["OLLAMA_API_KEY"],
    requiresApiKey: false,
    local: true,
    aliases: []
  },
  {
    name: "vllm",
    label: "vLLM",
    api: "openai-compatible",
    baseUrl: "http://127.0.0.1:8000/v1",
    baseUrlEnv: ["VLLM_BASE_URL"],
    apiKeyEnv: ["VLLM_API_KEY"],
    requiresApiKey: false,
    local: true,
    aliases: []
  },
  {
    name: "llamacpp",
    label: "llama.cpp server",
    api: "openai-compatible",
    baseUrl: "http://127.0.0.1:8080/v1",
    baseUrlEnv: ["LLAMACPP_BASE_URL"],
    apiKeyEnv: ["LLAMACPP_API_KEY"],
    requiresApiKey: false,
    local: true,
    aliases: ["llama.cpp", "llama-cpp"]
  },
  {
    name: "lmstudio",
    label: "LM Studio",
    api: "openai-compatible",
    baseUrl: "http://127.0.0.1:1234/v1",
    baseUrlEnv: ["LMSTUDIO_BASE_URL"],
    apiKeyEnv: ["LMSTUDIO_API_KEY"],
    requiresApiKey: false,
    local: true,
    aliases: ["lm-studio"]
  },
  {
    name: "openrouter",
    label: "OpenRouter",
    api: "openai-compatible",
    baseUrl: "https://openrouter.ai/api/v1",
    baseUrlEnv: ["OPENROUTER_BASE_URL"],
    apiKeyEnv: ["OPENROUTER_API_KEY"],
    requiresApiKey: true,
    local: false,
    aliases: []
  },
  {
    name: "llama-api",
    label: "Meta Llama API",
    api: "openai-compatible",
    baseUrl: "https://api.llama.com/compat/v1",
    baseUrlEnv: ["LLAMA_API_BASE_URL"],
    apiKeyEnv: ["LLAMA_API_KEY"],
    requiresApiKey: true,
    local: false,
    aliases: ["meta", "llama"]
  }
]

/** The provider names accepted in `provider/model` strings (aliases not included). */
export const names: ReadonlyArray<string> = providers.map((p) => p.name)

/** Looks a provider up by name or alias (case-insensitive). */
export const get = (name: string): Provider | undefined => {
  const n = name.toLowerCase()
  return providers.find((p) => p.name === n || p.aliases.includes(n))
}

/** A parsed `provider/model` string. */
export interface Spec {
  readonly provider: Provider
  /** The model id as the provider knows it (may itself contain `/`, e.g. `openrouter/anthropic/claude-sonnet-4.5`). */
  readonly model: string
}

/** Why a spec could not be parsed. */
export type SpecProblem =
  | { readonly _tag: "Empty" }
  | { readonly _tag: "NoProvider"; readonly model: string }
  | { readonly _tag: "UnknownProvider"; readonly provider: string }
  | { readonly _tag: "NoModel"; readonly provider: string }

const inferred: ReadonlyArray<readonly [RegExp, string]> = [
  [/^(gpt-|o\d|chatgpt-|codex-)/i, "openai"],
  [/^claude-/i, "anthropic"],
  [/^gemini-/i, "google"]
]

/**
 * Parses `provider/model`. Everything after the first `/` is the model id. A bare model id whose
 * family is unambiguous (`gpt-…`, `o3…`, `claude-…`, `gemini-…`) gets its provider inferred.
 */
export const parseSpec = (spec: string): Either.Either<Spec, SpecProblem> => {
  const s = spec.trim()
  if (s === "") return Either.left({ _tag: "Empty" })
  const slash = s.indexOf("/")
  if (slash === -1) {
    const hit = inferred.find(([re]) => re.test(s))
    return hit ? Either.right({ provider: get(hit[1])!, model: s }) : Either.left({ _tag: "NoProvider", model: s })
  }
  const name = s.slice(0, slash)
  const model = s.slice(slash + 1).trim()
  const provider = get(name)
  if (provider === undefined) return Either.left({ _tag: "UnknownProvider", provider: name })
  if (model === "") return Either.left({ _tag: "NoModel", provider: provider.name })
  return Either.right({ provider, model })
}
